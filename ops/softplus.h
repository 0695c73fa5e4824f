#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// log(1 + exp(beta x)) / beta elementwise, and x itself where beta x > threshold (PyTorch's
/// switch, for stability), as torch.nn.functional.softplus(x, beta, threshold). Throws
/// ValueError (an int64 tensor, beta 0 or not finite).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0,
                const std::source_location& where = std::source_location::current());
}  // namespace tg
