#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// e^x elementwise: dx = dy y.
Tensor exp(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
