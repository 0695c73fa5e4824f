#pragma once
#include "autograd/tensor.h"

namespace tg {
/// a - b elementwise with numpy broadcasting. Throws ShapeError (no broadcast) or ValueError
/// (dtypes differ).
Tensor sub(const Tensor& a, const Tensor& b);
}  // namespace tg
