#include <tapegrad/data/induction.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tapegrad/autograd/error.h>
#include <tapegrad/data/uniform.h>

namespace tg::data {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One sequence s of n tokens with period P over [0, V): the first P steps of a Fisher-Yates
// shuffle of 0..V-1, kept sparse (only the moved entries are stored) so a step costs O(1)
// whatever V is.
void induction_sequence(int64_t P, int64_t V, Rng& rng, int64_t* s, int64_t n) {
  std::unordered_map<int64_t, int64_t> moved;  // perm[k] where it differs from k
  const auto perm = [&](int64_t k) {
    const auto it = moved.find(k);
    return it == moved.end() ? k : it->second;
  };
  for (int64_t i = 0; i < P; ++i) {
    const auto j = i + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(V - i)));
    s[i] = perm(j);
    moved[j] = perm(i);  // swap(perm[i], perm[j]); perm[i] is never read again
  }
  for (int64_t t = P; t < n; ++t) s[t] = s[t - P];
}

}  // namespace

InductionBatch induction_batch(int64_t B, int64_t T, int64_t V, Rng& rng) {
  if (B < 1 || T < 1)
    throw ValueError("induction_batch: batch size " + std::to_string(B) + " and block size " +
                     std::to_string(T) + " must both be at least 1");
  const int64_t lo = ceil_div(T + 1, 4), hi = ceil_div(T + 1, 2);
  if (V < hi)
    throw ValueError("induction_batch: vocabulary size " + std::to_string(V) +
                     " is too small for block size T = " + std::to_string(T) +
                     ": a period of up to ceil((T + 1) / 2) = " + std::to_string(hi) +
                     " distinct tokens needs V >= " + std::to_string(hi));
  InductionBatch batch{Tensor({B, T}, Dtype::i64), Tensor({B, T}, Dtype::i64),
                       Tensor({B, T}, Dtype::i64)};
  int64_t* x = batch.x.data<int64_t>();               // (B, T)
  int64_t* y = batch.y.data<int64_t>();               // (B, T)
  int64_t* mask = batch.predictable.data<int64_t>();  // (B, T)
  std::vector<int64_t> s(static_cast<std::size_t>(T + 1));  // one sequence
  for (int64_t b = 0; b < B; ++b) {
    const int64_t P =
        lo + static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(hi - lo + 1)));
    induction_sequence(P, V, rng, s.data(), T + 1);
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = s[t];
      y[b * T + t] = s[t + 1];
      mask[b * T + t] = t >= P ? 1 : 0;
    }
  }
  return batch;
}

Tensor targets_predictable_only(const InductionBatch& batch) {
  Tensor result({batch.y.numel()}, Dtype::i64);
  int64_t* targets = result.data<int64_t>();  // (B * T)
  const int64_t* y = batch.y.data<int64_t>();
  const int64_t* mask = batch.predictable.data<int64_t>();
  for (int64_t i = 0; i < batch.y.numel(); ++i) targets[i] = mask[i] ? y[i] : -1;
  return result;
}

double induction_accuracy(const Tensor& logits, const InductionBatch& batch) {
  const int64_t B = batch.y.size(0), T = batch.y.size(1);
  if (logits.rank() != 3 || logits.size(0) != B || logits.size(1) != T || logits.size(2) < 1)
    throw ShapeError("induction_accuracy: logits " + logits.shape().str() + " do not fit targets " +
                     batch.y.shape().str() + ": expected (" + std::to_string(B) + ", " +
                     std::to_string(T) + ", V) with V >= 1");
  return scored_accuracy(logits, Batch{batch.x, batch.y, batch.predictable});
}

InductionBatches::InductionBatches(int64_t B, int64_t T, int64_t V) : B_(B), T_(T), V_(V) {}

Batch InductionBatches::train_batch(int64_t, Rng& rng) const {
  InductionBatch b = induction_batch(B_, T_, V_, rng);
  return {std::move(b.x), std::move(b.y), std::move(b.predictable)};
}

Batch InductionBatches::eval_batch(int64_t, Rng& rng) const { return train_batch(0, rng); }

}  // namespace tg::data
