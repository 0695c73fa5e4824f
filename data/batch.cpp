#include <tapegrad/data/batch.h>

#include <limits>
#include <string>

#include <tapegrad/autograd/error.h>

namespace tg::data {

namespace {

// Whether logits are y's shape with one more axis (the classes, at least one) at the end.
bool fits(const Tensor& logits, const Tensor& y) {
  if (logits.rank() != y.rank() + 1 || logits.size(-1) < 1) return false;
  for (int a = 0; a < y.rank(); ++a)
    if (logits.size(a) != y.size(a)) return false;
  return true;
}

}  // namespace

int64_t scored_count(const Batch& batch) {
  if (!batch.scored.defined()) return 0;
  const int64_t* s = batch.scored.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < batch.scored.numel(); ++i) n += s[i] != 0;
  return n;
}

double scored_accuracy(const Tensor& logits, const Batch& batch) {
  if (!batch.scored.defined()) return std::numeric_limits<double>::quiet_NaN();
  if (!fits(logits, batch.y))
    throw ShapeError("scored_accuracy: logits " + logits.shape().str() + " do not fit labels " +
                     batch.y.shape().str() + ": expected the labels' shape and then C >= 1");
  const int64_t N = batch.y.numel(), C = logits.size(-1);
  const int64_t* y = batch.y.data<int64_t>();
  const int64_t* mask = batch.scored.data<int64_t>();
  int64_t correct = 0, counted = 0;
  dispatch(logits.dtype(), [&]<class T_>() {
    const T_* z = logits.data<T_>();  // (N, C)
    for (int64_t i = 0; i < N; ++i) {
      if (!mask[i]) continue;
      const T_* row = z + i * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)  // NaN counts as the maximum, as in torch.argmax
        if (row[c] > row[best] || (row[c] != row[c] && row[best] == row[best])) best = c;
      ++counted;
      correct += best == y[i];
    }
  });
  if (counted == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(correct) / static_cast<double>(counted);
}

}  // namespace tg::data
