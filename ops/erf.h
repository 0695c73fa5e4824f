#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The Gauss error function elementwise: dx = dy 2/sqrt(pi) exp(-x^2).
Tensor erf(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
