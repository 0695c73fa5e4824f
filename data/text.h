#pragma once
// Char-level text for next-token training, as nanoGPT's shakespeare_char: the text's tokens
// split into the first 90% for training and the last 10% for validation,
//   n = len(data); train = data[:int(n * 0.9)]; val = data[int(n * 0.9):]
// and a batch is B windows of T + 1 tokens at random offsets (x = window[:T], y = window[1:]).

#include <cstdint>
#include <string_view>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/data/batch.h>
#include <tapegrad/data/source.h>
#include <tapegrad/data/tokenizer.h>

namespace tg::data {

enum class Split { train, val };

/// "train" or "val", for messages.
const char* split_name(Split split);

class TextData {
 public:
  /// Encodes `text` and splits it 90/10; throws ValueError for a character outside the
  /// tokenizer's vocabulary (see CharTokenizer::encode).
  TextData(std::string_view text, const CharTokenizer& tokenizer);

  const std::vector<int64_t>& tokens(Split split) const {
    return split == Split::train ? train_ : val_;
  }

  /// B windows of T + 1 tokens of `split`. The offsets are drawn in row order, each uniform in
  /// [0, len - T - 1] by uniform_below(rng, len - T) (data/uniform.h: the same numbers on every
  /// platform for a seed; nanoGPT's torch.randint(len - T, (B,)) range). Throws ValueError when
  /// B or T is below 1 or the split holds fewer than T + 1 tokens (naming it, its length and T).
  Batch sample(Split split, int64_t B, int64_t T, Rng& rng) const;

 private:
  std::vector<int64_t> train_;
  std::vector<int64_t> val_;
};

/// A text as a source: training batches of B windows of T + 1 tokens from the training split,
/// evaluation batches from the validation split (TextData::sample).
class TextBatches : public Source {
 public:
  /// Never throws; the draws throw as TextData::sample (a split shorter than T + 1 tokens).
  TextBatches(TextData text, int64_t B, int64_t T);
  const TextData& text() const { return text_; }
  int64_t batch_size() const override { return B_; }
  Batch train_batch(int64_t step, Rng& rng) const override;
  Batch eval_batch(int64_t i, Rng& rng) const override;

 private:
  TextData text_;
  int64_t B_, T_;
};

}  // namespace tg::data
