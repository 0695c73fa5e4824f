#pragma once
#include <cstdint>
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// torch.nn.functional.cross_entropy's keyword arguments, in its order, so a call reads as in
/// PyTorch: `cross_entropy(logits, targets, {.weight = w, .ignore_index = -1,
/// .label_smoothing = 0.1})`.
struct CrossEntropyOptions {
  Tensor weight{};               // (V,) class weights in the logits' dtype; undefined: all 1
  int64_t ignore_index = -100;   // targets equal to it count for nothing (PyTorch's default)
  double label_smoothing = 0.0;  // in [0, 1]
};

/// Mean cross-entropy of logits (..., V), the classes on the last axis, against int64 targets of
/// the leading shape (...): (N, V) with (N,), (B, T, V) with (B, T), or (V,) with (). The same
/// as torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1), weight,
/// ignore_index=ignore_index, label_smoothing=eps) with reduction 'mean', in PyTorch 1.13's
/// semantics:
///   L = sum_{n kept} [(1 - eps) w_{t_n} (lse_n - X[n, t_n]) + eps / V sum_c w_c (lse_n - X[n, c])]
///       / sum_{n kept} w_{t_n}
/// (w = 1 without a weight, so the denominator is the count of targets kept). A zero
/// denominator (every target ignored) gives NaN, as PyTorch, and a zero gradient. The weight is
/// a constant: no gradient flows to it. Throws ShapeError (logits rank 0, targets not of the
/// leading shape, weight not (V,)), ValueError (targets not int64, a target outside [0, V) that
/// is not ignore_index, a weight that requires grad or differs in dtype, label_smoothing outside
/// [0, 1]).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options,
                     const std::source_location& where = std::source_location::current());

/// The same with only ignore_index given: `cross_entropy(logits, targets, -1)` (nanoGPT's -1).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     const std::source_location& where = std::source_location::current());

}  // namespace tg
