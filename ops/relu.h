#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// max(x, 0) elementwise: dx = dy where x > 0, else 0 (0 at x = 0, as PyTorch).
Tensor relu(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
