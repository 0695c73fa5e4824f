#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Group normalisation of (N, C, *) as torch.nn.functional.group_norm: the C channels form
/// `groups` groups of C / groups; each sample's group is normalised over its channels and
/// positions (biased variance), then y = xhat * weight + bias per channel. weight and bias are
/// (C,) or undefined (1 and 0). Throws ShapeError (rank < 2, C not divisible by groups, weight
/// or bias not (C,)) or ValueError (groups < 1, dtypes differ, eps < 0).
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                  double eps = 1e-5,
                  const std::source_location& where = std::source_location::current());
}  // namespace tg
