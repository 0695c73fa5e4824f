#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Batch normalisation over axis 1 of (N, C), (N, C, L) or (N, C, H, W) (any rank >= 2), as
/// torch.nn.functional.batch_norm: y = (x - mean) / sqrt(var + eps) * weight + bias per channel.
/// Training: mean and the biased var of the batch (all axes but 1); running_mean and running_var,
/// when defined, are updated in place (bumping their versions) as r = (1 - momentum) r +
/// momentum s with the unbiased variance, and no gradient flows through them. Evaluation: uses
/// running_mean and running_var. weight, bias, running_mean, running_var are (C,) or undefined
/// (weight 1, bias 0; running stats not tracked). Throws ShapeError (rank < 2, a (C,) tensor of
/// another shape), ValueError (dtypes differ, a running stat requiring grad or only one given,
/// evaluation without running stats, one value per channel in training, eps < 0, momentum not
/// finite).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5,
                  const std::source_location& where = std::source_location::current());
}  // namespace tg
