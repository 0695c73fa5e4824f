#include <tapegrad/data/batches.h>

#include <algorithm>

#include <tapegrad/autograd/error.h>
#include <tapegrad/io/npy.h>

namespace tg::data {

FixedBatches::FixedBatches(const std::string& path, int64_t vocab_size) : path_(path) {
  if (vocab_size < 0)
    throw ValueError("FixedBatches: vocab_size " + std::to_string(vocab_size) + " is negative");
  tokens_ = read_npy(path, NpyAccept::floats_and_ints);
  const Shape& s = tokens_.shape();
  if (tokens_.dtype() != Dtype::i64)
    throw IoError(path + ": dtype " + dtype_name(tokens_.dtype()) +
                  "; fixed batches hold token ids, int64 ('<i8') or int32 ('<i4')");
  if (s.rank() != 3)
    throw IoError(path + ": shape " + s.str() + " has rank " + std::to_string(s.rank()) +
                  "; fixed batches have shape (N, B, T + 1)");
  if (s[0] == 0 || s[1] == 0)
    throw ValueError(path + ": shape " + s.str() + " holds no batches (N and B must be >= 1)");
  if (s[2] < 2)
    throw ValueError(path + ": shape " + s.str() + " has windows of " + std::to_string(s[2]) +
                     " tokens; T + 1 must be at least 2");
  const int64_t* p = std::as_const(tokens_).data<int64_t>();
  for (int64_t i = 0; i < tokens_.numel(); ++i) {
    if (p[i] < 0 || (vocab_size > 0 && p[i] >= vocab_size))
      throw ValueError(path + ": token " + std::to_string(p[i]) + " at " + s.index_str(i) +
                       (vocab_size > 0
                            ? " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")"
                            : " is negative"));
  }
}

Batch FixedBatches::batch(int64_t step) const {
  if (step < 0)
    throw ValueError("FixedBatches::batch(" + path_ + "): step " + std::to_string(step) +
                     " is negative");
  const int64_t B = batch_size(), T = block_size();
  const int64_t n = step % num_batches();
  const int64_t* window = tokens_.data<int64_t>() + n * B * (T + 1);  // (B, T + 1)
  Batch batch{Tensor({B, T}, Dtype::i64), Tensor({B, T}, Dtype::i64)};
  int64_t* x = batch.x.data<int64_t>();  // (B, T)
  int64_t* y = batch.y.data<int64_t>();  // (B, T)
  for (int64_t b = 0; b < B; ++b, window += T + 1) {
    std::copy_n(window, T, x + b * T);
    std::copy_n(window + 1, T, y + b * T);
  }
  return batch;
}

}  // namespace tg::data
