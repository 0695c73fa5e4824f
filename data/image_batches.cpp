#include <tapegrad/data/image_batches.h>

#include <algorithm>
#include <string>
#include <utility>

namespace tg::data {

namespace {

// The fewest equal parts of n that hold at most `most` each (n itself, of one, at worst).
int64_t equal_parts(int64_t n, int64_t most) {
  for (int64_t k = (n + most - 1) / most; k < n; ++k)
    if (n % k == 0) return k;
  return std::max<int64_t>(n, 1);
}

}  // namespace

ImageBatches::ImageBatches(ImageFolder folder, int64_t batch, bool shuffle, int64_t train_limit,
                           uint64_t seed)
    : folder_(std::move(folder)), batch_(batch), shuffle_(shuffle), seed_(seed),
      order_rng_(seed) {
  const int64_t total = folder_.train.images.size(0);
  if (batch < 1) throw ValueError("ImageBatches: batch = " + std::to_string(batch) + " < 1");
  if (train_limit < 0 || train_limit > total)
    throw ValueError("--train-limit " + std::to_string(train_limit) + ": the training set has " +
                     std::to_string(total) + " images");
  n_ = train_limit > 0 ? train_limit : total;
  const int64_t tests = folder_.test.images.size(0);
  eval_batches_ = equal_parts(tests, 256);
  Rng unused(0);  // file order draws nothing
  test_order_ = epoch_order(tests, unused, /*shuffle=*/false);
}

const std::vector<int64_t>& ImageBatches::order(int64_t epoch) const {
  if (epoch < cached_epoch_) {  // start the stream again
    cached_epoch_ = -1;
    order_rng_ = Rng(seed_);
  }
  while (cached_epoch_ < epoch) {
    order_ = epoch_order(n_, order_rng_, shuffle_);
    ++cached_epoch_;
  }
  return order_;
}

Batch ImageBatches::train_batch(int64_t step, Rng&) const {
  if (step < 0) throw ValueError("ImageBatches: step " + std::to_string(step) + " < 0");
  const int64_t epoch = step / steps_per_epoch(), start = step % steps_per_epoch() * batch_;
  return image_batch(folder_.train, order(epoch), start, std::min(batch_, n_ - start));
}

Batch ImageBatches::eval_batch(int64_t i, Rng&) const {
  if (i < 0 || i >= eval_batches_)
    throw ValueError("ImageBatches: evaluation batch " + std::to_string(i) + " of " +
                     std::to_string(eval_batches_));
  const int64_t size = folder_.test.images.size(0) / eval_batches_;
  Batch b = image_batch(folder_.test, test_order_, i * size, size);
  b.scored = from_indices(std::vector<int64_t>(static_cast<std::size_t>(size), 1), {size});
  return b;
}

}  // namespace tg::data
