#include "tools/train_dist.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <tapegrad/ops/operators.h>

namespace tg {

namespace {

// Rows [first, first + rows) of a (B, ...) tensor of any dtype, as a tensor of their own.
Tensor rows_of(const Tensor& t, int64_t first, int64_t rows) {
  Shape shape = t.shape();
  const int64_t row = t.numel() / shape[0];  // elements per row
  shape[0] = rows;
  Tensor out(shape, t.dtype());
  const std::size_t bytes = dtype_size(t.dtype());
  const auto* from = static_cast<const char*>(t.impl().storage->data()) + first * row * bytes;
  std::memcpy(out.impl().storage->data(), from, static_cast<std::size_t>(rows * row) * bytes);
  return out;
}

// Labels cross_entropy counts: all but ignore_index (-1, Model::loss's).
int64_t counted(const Tensor& y) {
  const int64_t* p = y.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < y.numel(); ++i) n += p[i] != -1;
  return n;
}

// splitmix64's finaliser: nearby inputs (step, step + 1) give unrelated outputs.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void check_batch_splits(int64_t B, int ranks) {
  if (B % ranks != 0)
    throw UsageError("--batch " + std::to_string(B) + " does not split over " +
                     std::to_string(ranks) + " ranks: each rank takes B / N rows, so give a " +
                     "multiple of " + std::to_string(ranks));
}

// L = (1 / n) sum_i l_i over the n counted targets of the whole batch. Rank r computes its own
// mean L_r = (1 / n_r) sum_{i in r} l_i; average_gradients then takes the mean over the N ranks
// of what they backpropagate. Rank r therefore backpropagates L_r * N n_r / n:
//   (1 / N) sum_r (N n_r / n) L_r = (1 / n) sum_r sum_{i in r} l_i = L.
// With no ignored target n_r = n / N and the factor is exactly 1 (no extra op, no rounding).
// The counts come from the global batch, which every rank holds, so no allreduce is needed.
SliceLoss slice_loss(const Model& model, const data::Batch& batch, int rank, int ranks) {
  if (ranks == 1) {
    SliceLoss out{model.batch_loss(batch), 0};
    out.share = out.backprop.item();  // as the one-process loop always did, bit for bit
    return out;
  }
  // Rank r's rows: [B r / N, B (r + 1) / N), equal parts when N divides B (a full batch), else
  // (an epoch's short last batch of images) parts that differ by one row, or are empty.
  const int64_t B = batch.x.size(0), lo = B * rank / ranks, b = B * (rank + 1) / ranks - lo;
  const int64_t n = counted(batch.y);
  SliceLoss out;
  if (n == 0) {  // one process gets NaN from a mean over nothing: so does the sum of the shares
    out.share = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  if (b == 0) return out;  // no rows for this rank; average_gradients counts it as zeros
  const Tensor x = rows_of(batch.x, lo, b), y = rows_of(batch.y, lo, b);  // (b, T)
  const int64_t n_r = counted(y);
  if (n_r == 0) return out;  // this rank adds nothing; average_gradients counts it as zeros
  const Tensor L_r = model.batch_loss({x, y});  // ()
  const double weight = static_cast<double>(n_r) / static_cast<double>(n);
  const double factor = weight * ranks;
  out.backprop = factor == 1.0 ? L_r : L_r * factor;
  out.share = L_r.item() * weight;
  return out;
}

int ranks_on_this_machine() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* n = std::getenv(var); n != nullptr && std::atoi(n) >= 1) return std::atoi(n);
  return 1;
}

void broadcast_string(dist::Communicator& comm, std::string& text, int root) {
  int64_t length = static_cast<int64_t>(text.size());
  comm.broadcast_bytes(&length, sizeof length, root);
  text.resize(static_cast<size_t>(length));
  comm.broadcast_bytes(text.data(), length, root);
}

uint64_t rank_dropout_seed(uint64_t seed, int64_t step, int rank) {
  return mix(mix(seed ^ 0xD1B54A32D192ED03ull) + static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull +
             static_cast<uint64_t>(rank));
}

}  // namespace tg
