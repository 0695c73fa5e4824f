#pragma once
// Gradient clipping as torch.nn.utils.clip_grad_norm_ (norm_type 2):
//   total = sqrt(sum over every gradient element of g^2)      (accumulated in double)
//   total > max_norm:  g *= max_norm / (total + 1e-6)          (every gradient, in place)
// Parameters without a gradient are left out. A NaN or infinite total is returned and nothing
// is scaled (torch's error_if_nonfinite=False returns it too, but then multiplies every
// gradient by a NaN or zero coefficient); the caller decides what a non-finite norm means.

#include <tapegrad/autograd/tensor.h>

namespace tg::optim {

/// Clips the gradients of `params` to a total 2-norm of max_norm and returns the norm before
/// clipping (0 when no parameter has a gradient). Throws ValueError when max_norm is negative
/// or NaN.
double clip_grad_norm(const NamedTensors& params, double max_norm);

/// The total 2-norm of the gradients of `params`, without clipping; throws nothing.
double grad_norm(const NamedTensors& params);

}  // namespace tg::optim
