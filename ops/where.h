#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// torch.where(cond, A, B): A where cond, else B, elementwise; cond (bool), A and B broadcast
/// together (numpy style) to the output's shape. A and B have one floating dtype; the gradient
/// goes to A where cond holds and to B elsewhere. Throws ValueError (cond not bool, A or B not
/// float32/float64, dtypes differ), ShapeError (no broadcast).
Tensor where(const Tensor& cond, const Tensor& A, const Tensor& B,
             const std::source_location& where = std::source_location::current());
/// where with a scalar: where(cond, A, value) and where(cond, value, B) (of the tensor's dtype).
Tensor where(const Tensor& cond, const Tensor& A, double value,
             const std::source_location& where = std::source_location::current());
Tensor where(const Tensor& cond, double value, const Tensor& B,
             const std::source_location& where = std::source_location::current());
}  // namespace tg
