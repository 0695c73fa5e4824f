#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Natural log elementwise (log 0 = -inf, negative gives NaN, as in PyTorch): dx = dy / x.
Tensor log(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
