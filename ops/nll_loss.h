#pragma once
#include <cstdint>
#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/loss_reduction.h>

namespace tg {

/// torch.nn.functional.nll_loss's keyword arguments, in its order:
/// `nll_loss(logp, target, {.weight = w, .ignore_index = -1, .reduction = Reduction::sum})`.
struct NllLossOptions {
  Tensor weight{};              // (C,) class weights in logp's dtype; undefined: all 1; a constant
  int64_t ignore_index = -100;  // targets equal to it count for nothing (PyTorch's default)
  Reduction reduction = Reduction::mean;
};

/// Negative log-likelihood of log-probabilities logp against int64 class targets, as
/// torch.nn.functional.nll_loss: logp (N, C) with target (N,), (N, C, d1, ...) with target
/// (N, d1, ...), or (C,) with target (). E_i = -w_{t_i} logp[i, t_i] (0 where t_i is
/// ignore_index); none gives E of the target's shape, sum its sum, mean sum E / sum_{kept}
/// w_{t_i} (NaN when every target is ignored, as PyTorch, with a zero gradient). Throws
/// ShapeError (target not of logp's shape without the class axis, weight not (C,)) or ValueError
/// (logp not floating, target not int64, a target outside [0, C) that is not ignore_index, a
/// weight that requires grad or differs in dtype).
Tensor nll_loss(const Tensor& logp, const Tensor& target, const NllLossOptions& options,
                const std::source_location& where = std::source_location::current());

/// The same with only ignore_index given.
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100,
                const std::source_location& where = std::source_location::current());

}  // namespace tg
