#include <tapegrad/data/text.h>

#include <algorithm>
#include <string>
#include <utility>

#include <tapegrad/autograd/error.h>
#include <tapegrad/data/uniform.h>

namespace tg::data {

const char* split_name(Split split) { return split == Split::train ? "train" : "val"; }

TextData::TextData(std::string_view text, const CharTokenizer& tokenizer) {
  const std::vector<int64_t> ids = tokenizer.encode(text);
  // int(n * 0.9) in Python: the double product truncated, exact for any text that fits memory.
  const auto n_train = static_cast<std::ptrdiff_t>(static_cast<double>(ids.size()) * 0.9);
  train_.assign(ids.begin(), ids.begin() + n_train);
  val_.assign(ids.begin() + n_train, ids.end());
}

Batch TextData::sample(Split split, int64_t B, int64_t T, Rng& rng) const {
  if (B < 1 || T < 1)
    throw ValueError("TextData::sample: batch size " + std::to_string(B) + " and block size " +
                     std::to_string(T) + " must both be at least 1");
  const std::vector<int64_t>& data = tokens(split);
  const auto len = static_cast<int64_t>(data.size());
  if (len < T + 1)
    throw ValueError(std::string("TextData::sample: the ") + split_name(split) + " split has " +
                     std::to_string(len) + " tokens, fewer than block size T + 1 = " +
                     std::to_string(T + 1) + " (T = " + std::to_string(T) + ")");
  Batch batch{Tensor({B, T}, Dtype::i64), Tensor({B, T}, Dtype::i64)};
  int64_t* x = batch.x.data<int64_t>();  // (B, T)
  int64_t* y = batch.y.data<int64_t>();  // (B, T)
  for (int64_t b = 0; b < B; ++b) {
    const auto offset = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(len - T)));
    std::copy_n(data.begin() + offset, T, x + b * T);
    std::copy_n(data.begin() + offset + 1, T, y + b * T);
  }
  return batch;
}

TextBatches::TextBatches(TextData text, int64_t B, int64_t T)
    : text_(std::move(text)), B_(B), T_(T) {}

Batch TextBatches::train_batch(int64_t, Rng& rng) const {
  return text_.sample(Split::train, B_, T_, rng);
}

Batch TextBatches::eval_batch(int64_t, Rng& rng) const {
  return text_.sample(Split::val, B_, T_, rng);
}

}  // namespace tg::data
