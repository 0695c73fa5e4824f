#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// tanh elementwise: dx = dy (1 - y^2).
Tensor tanh(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
