#pragma once
// Where a run's batches come from: the training batch of each update in
// order, and the batches an evaluation averages over. Text windows (data/text.h), the induction
// task (data/induction.h) and fixed batches (data/batches.h) are sources; images are next. A
// source keeps no generator of its own: the run passes its own, so that a checkpoint saves the
// training stream's state and every evaluation draws the same batches from a fresh generator.

#include <cstdint>

#include <tapegrad/data/batch.h>

namespace tg::data {

class Source {
 public:
  virtual ~Source() = default;
  /// Rows per batch.
  virtual int64_t batch_size() const = 0;
  /// The training batch of update `step` (0, 1, ...), drawn from the run's data stream `rng`.
  virtual Batch train_batch(int64_t step, Rng& rng) const = 0;
  /// Batch i of an evaluation, which draws its batches i = 0, 1, ... in order from `rng`.
  virtual Batch eval_batch(int64_t i, Rng& rng) const = 0;
};

}  // namespace tg::data
