#include <tapegrad/optim/lr_schedule.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include <tapegrad/autograd/error.h>

namespace tg::optim {

double get_lr(int64_t it, double lr, double lr_min, int64_t warmup, int64_t steps) {
  const bool rates_ok = lr >= 0 && std::isfinite(lr) && lr_min >= 0 && std::isfinite(lr_min);
  if (it < 0 || warmup < 0 || steps < 1 || !rates_ok) {
    std::ostringstream os;
    os << "get_lr: need it >= 0, warmup >= 0, steps >= 1 and finite rates >= 0, got it = " << it
       << ", warmup = " << warmup << ", steps = " << steps << ", lr = " << lr
       << ", lr_min = " << lr_min;
    throw ValueError(os.str());
  }
  if (it < warmup)
    return lr * static_cast<double>(it + 1) / static_cast<double>(warmup + 1);
  const int64_t span = steps - 1 - warmup;
  if (span <= 0) return lr_min;  // no decay span: the rate has reached its end
  const double r = std::min(1.0, static_cast<double>(it - warmup) / static_cast<double>(span));
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * r));
  return lr_min + coeff * (lr - lr_min);
}

double LrSchedule::operator()(int64_t it) const { return get_lr(it, lr, lr_min, warmup, steps); }

}  // namespace tg::optim
