#pragma once
#include "autograd/tensor.h"

namespace tg {
/// The sum of all elements, as a rank-0 tensor.
Tensor sum(const Tensor& x);
/// The sum along one axis (negative counts from the end), kept as size 1 when keepdim.
/// Throws ShapeError for a bad axis.
Tensor sum(const Tensor& x, int axis, bool keepdim = false);
}  // namespace tg
