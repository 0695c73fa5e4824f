#pragma once
// Fixed batches: the same token windows every run, read from an int64 ('<i8') or int32 ('<i4')
// .npy of shape (N, B, T + 1). Step s uses batch s mod N: x = window[:T], y = window[1:].

#include <cstdint>
#include <string>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/data/batch.h>
#include <tapegrad/data/source.h>

namespace tg::data {

class FixedBatches : public Source {
 public:
  /// Reads and checks `path`. Tokens must be >= 0, and below vocab_size when it is given (> 0).
  /// Throws IoError naming the file (unreadable or malformed .npy, a float dtype, rank not 3)
  /// and ValueError naming it (no batches, T + 1 < 2, a token outside the vocabulary: the value
  /// and its index), or ValueError for a negative vocab_size.
  explicit FixedBatches(const std::string& path, int64_t vocab_size = 0);

  int64_t num_batches() const { return tokens_.size(0); }           // N
  int64_t batch_size() const override { return tokens_.size(1); }  // B
  int64_t block_size() const { return tokens_.size(2) - 1; }        // T

  /// The batch for update `step`: batch step mod N. Throws ValueError for a negative step.
  Batch batch(int64_t step) const;

  /// As a source: update s trains on batch(s); evaluation batch i is batch(i) (there is no
  /// held-out split). Neither draws from rng.
  Batch train_batch(int64_t step, Rng&) const override { return batch(step); }
  Batch eval_batch(int64_t i, Rng&) const override { return batch(i); }

 private:
  std::string path_;
  Tensor tokens_;  // (N, B, T + 1) int64
};

}  // namespace tg::data
