#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// sqrt elementwise: dx = dy / (2 y).
Tensor sqrt(const Tensor& x, const std::source_location& where = std::source_location::current());
/// 1 / sqrt(x) elementwise: dx = -dy y^3 / 2.
Tensor rsqrt(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
