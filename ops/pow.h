#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x^p elementwise for a scalar p, as torch.pow(x, p) (NaN for x < 0 and a fractional p). The
/// gradient p x^(p - 1) is PyTorch's also at x = 0: 0 for p > 1, 1 for p = 1, inf for 0 < p < 1;
/// p = 0 gives 0. Throws ValueError for an int64 tensor.
Tensor pow(const Tensor& x, double p, const std::source_location& where = std::source_location::current());
}  // namespace tg
