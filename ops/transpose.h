#pragma once
#include "autograd/tensor.h"

namespace tg {
/// Swaps the last two axes (a copy). Throws ShapeError below rank 2.
Tensor transpose(const Tensor& x);
}  // namespace tg
