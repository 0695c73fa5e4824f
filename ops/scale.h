#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// c * x for a constant c. Never throws for a defined x.
Tensor scale(const Tensor& x, double c, const std::source_location& where = std::source_location::current());
}  // namespace tg
