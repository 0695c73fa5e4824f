#pragma once
// The induction task. Each sequence s has T + 1 tokens: a period P drawn
// uniformly from [ceil((T + 1) / 4), ceil((T + 1) / 2)], then P distinct tokens drawn without
// replacement from [0, V), then repeats: s[t] = s[t - P] for t >= P. x = s[:T], y = s[1:].
// The period varies per sequence, so no fixed positional offset solves it: the model has to find
// the earlier occurrence of the current token x[t] = s[t] and copy the token after it. That
// occurrence exists when t >= P, so the targets y[t] with t >= P are the predictable ones (T - P
// per sequence); y[P - 1] = s[0] is not, since s[P - 1] has not been seen before.

#include <cstdint>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/data/source.h>

namespace tg::data {

struct InductionBatch {
  Tensor x;            // (B, T) int64
  Tensor y;            // (B, T) int64
  Tensor predictable;  // (B, T) int64: 1 where y[b, t] is predictable (t >= P of row b), else 0
};

/// B sequences of the induction task. Per sequence, in order: P = lo + uniform_below(rng,
/// hi - lo + 1), then s[0:P] as the first P steps of a Fisher-Yates shuffle of a fresh 0..V-1
/// (step i swaps entry i with entry i + uniform_below(rng, V - i)); data/uniform.h makes a seed
/// give the same batch on every platform. Throws ValueError when B or T is below 1 or
/// V < ceil((T + 1) / 2).
InductionBatch induction_batch(int64_t B, int64_t T, int64_t V, Rng& rng);

/// y with -1 where the target is not predictable, flattened to (B * T): cross_entropy's targets
/// with ignore_index = -1 then give the loss on the predictable targets only.
Tensor targets_predictable_only(const InductionBatch& batch);

/// Argmax accuracy (first maximum on ties, as torch.argmax) of logits (B, T, V) on the
/// predictable targets; NaN when the batch has none (possible only for T <= 2). Throws
/// ShapeError when logits are not (B, T, V) for the batch, ValueError for int64 logits.
double induction_accuracy(const Tensor& logits, const InductionBatch& batch);

/// The task as a source: training and evaluation batches alike are induction_batch(B, T, V)
/// from the generator given, with the predictable targets as the labels an accuracy counts.
class InductionBatches : public Source {
 public:
  /// Never throws; the draws throw as induction_batch for B, T or V it cannot draw from.
  InductionBatches(int64_t B, int64_t T, int64_t V);
  int64_t batch_size() const override { return B_; }
  Batch train_batch(int64_t step, Rng& rng) const override;
  Batch eval_batch(int64_t i, Rng& rng) const override;

 private:
  int64_t B_, T_, V_;
};

}  // namespace tg::data
