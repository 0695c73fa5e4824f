#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The larger of a and b elementwise with numpy broadcasting, as torch.maximum (NaN if either is
/// NaN). At ties the gradient is split half and half, as PyTorch's. Throws ShapeError (no
/// broadcast) or ValueError (an int64 tensor, dtypes differ).
Tensor maximum(const Tensor& a, const Tensor& b, const std::source_location& where = std::source_location::current());
}  // namespace tg
