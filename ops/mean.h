#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The mean of all elements, as a rank-0 tensor (NaN for an empty tensor, as PyTorch).
Tensor mean(const Tensor& x, const std::source_location& where = std::source_location::current());
/// The mean along one axis (negative counts from the end), kept as size 1 when keepdim.
/// Throws ShapeError for a bad axis.
Tensor mean(const Tensor& x, int axis, bool keepdim = false, const std::source_location& where = std::source_location::current());
}  // namespace tg
