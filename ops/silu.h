#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x * sigmoid(x) elementwise (swish), as torch.nn.functional.silu. Throws ValueError for an
/// int64 tensor.
Tensor silu(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
