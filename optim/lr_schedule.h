#pragma once
// The learning-rate schedule of nanoGPT's get_lr(it), for updates it = 0 .. steps - 1:
//   it < warmup:  lr (it + 1) / (warmup + 1)                              linear warmup
//   else:         lr_min + 0.5 (1 + cos(pi r)) (lr - lr_min),             cosine decay
//                 r = (it - warmup) / (steps - 1 - warmup), clamped to [0, 1]
// so the first update after warmup uses lr and the last (it = steps - 1) uses lr_min exactly.
// When steps - 1 - warmup <= 0 there is no decay span: the warmup runs as written and every
// update from `warmup` on uses lr_min (so with warmup = steps - 1 the last update still uses
// lr_min; with warmup >= steps every update is a warmup update, as in nanoGPT). Updates past
// steps - 1 use lr_min. With warmup 0 and lr_min = lr the rate is lr at every update.

#include <cstdint>

namespace tg::optim {

struct LrSchedule {
  double lr = 1e-3;
  double lr_min = 1e-4;
  int64_t warmup = 100;
  int64_t steps = 2000;

  /// The rate of update `it`; throws ValueError (see get_lr).
  double operator()(int64_t it) const;
};

/// The rate of update `it` (formula above). Throws ValueError when it < 0, warmup < 0,
/// steps < 1, or lr or lr_min is negative or not finite.
double get_lr(int64_t it, double lr, double lr_min, int64_t warmup, int64_t steps);

}  // namespace tg::optim
