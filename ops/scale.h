#pragma once
#include "autograd/tensor.h"

namespace tg {
/// c * x for a constant c. Never throws for a defined x.
Tensor scale(const Tensor& x, double c);
}  // namespace tg
