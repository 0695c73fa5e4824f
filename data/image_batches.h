#pragma once
// Image batches for a run by epochs (data/idx.h's folders): epoch e visits the first
// `train_limit` training images (all when 0) once, in batches of B (the last one of an epoch
// smaller when B does not divide them), in the order epoch_order draws for that epoch; an
// evaluation scores every test image, in equal batches of at most 256.
//
// The epoch orders come from a generator of their own, seeded with the run's seed and drawn one
// epoch after another, not from the run's data stream: the batch of a step depends on the step
// alone, so a run resumed in the middle of an epoch finds that epoch's order again.

#include <cstdint>
#include <vector>

#include <tapegrad/data/idx.h>
#include <tapegrad/data/source.h>

namespace tg::data {

class ImageBatches : public Source {
 public:
  /// Throws ValueError for batch < 1, a negative train_limit, or one larger than the training
  /// set.
  ImageBatches(ImageFolder folder, int64_t batch, bool shuffle, int64_t train_limit,
               uint64_t seed);

  int64_t batch_size() const override { return batch_; }
  /// The training images an epoch visits.
  int64_t train_size() const { return n_; }
  /// Updates per epoch: ceil(train_size() / batch_size()).
  int64_t steps_per_epoch() const { return (n_ + batch_ - 1) / batch_; }
  /// Batch step % steps_per_epoch() of epoch step / steps_per_epoch(): x (b, 1, H, W), y (b).
  /// `rng` is not drawn from (see above). Throws ValueError for a negative step.
  Batch train_batch(int64_t step, Rng& rng) const override;
  /// The number of evaluation batches that cover the test set: the fewest of equal size that
  /// hold at most 256 images each.
  int64_t eval_batches() const { return eval_batches_; }
  /// Test batch i of eval_batches(), every label scored. Throws ValueError outside that range.
  Batch eval_batch(int64_t i, Rng& rng) const override;
  const ImageFolder& folder() const { return folder_; }

 private:
  // The order of epoch `epoch`, drawn after those of the epochs before it.
  const std::vector<int64_t>& order(int64_t epoch) const;

  ImageFolder folder_;
  int64_t batch_, n_;
  bool shuffle_;
  uint64_t seed_;
  int64_t eval_batches_;
  std::vector<int64_t> test_order_;
  mutable int64_t cached_epoch_ = -1;  // the epoch order_ holds
  mutable std::vector<int64_t> order_;
  mutable Rng order_rng_;              // after drawing cached_epoch_'s order
};

}  // namespace tg::data
