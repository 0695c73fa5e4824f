// dropout: Y = X * M,  M_i = [u_i >= p] / (1 - p) with u_i = rng.uniform(0, 1), one draw per
//   entry in order;  dX = dY * M;  tY = tX * M
// p = 1 drops everything: M = 0 (not 0 / 0). In eval or with p = 0, Y is X itself.

#include <tapegrad/ops/dropout.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace detail {

// An entry is kept when rng.uniform(0, 1) >= p. Rng::unit is non-decreasing in the draw, so for
// p < 1 (unit of the largest draw is 1 - 2^-53 >= p) the kept draws are those from one on: this
// one, found by bisection.
uint64_t first_kept_draw(double p) {
  uint64_t lo = 0, hi = UINT64_MAX;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (Rng::unit(mid) >= p)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace detail

Tensor dropout(const Tensor& X, double p, bool training, Rng& rng,
               const std::source_location& where) {
  detail::check_defined("dropout", X, "input");
  if (!(p >= 0.0 && p <= 1.0))
    throw ValueError("dropout: p must be in [0, 1], got " + std::to_string(p) + " for shape " +
                     X.shape().str());
  if (!is_floating(X.dtype()))
    throw ValueError("dropout: needs a float32 or float64 tensor, got int64 of shape " +
                     X.shape().str());
  if (!training || p == 0.0) return X;
  const int64_t n = X.numel();
  const double keep_scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  const uint64_t keep_from = p < 1.0 ? detail::first_kept_draw(p) : 0;  // p = 1: the scale is 0
  Tensor mask(X.shape(), X.dtype());
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* m = mask.data<T>();
    T* y = Y.data<T>();
    // The engine's draws a block at a time, then the block's mask and output without a branch
    // (a kept entry is as likely as not to follow a dropped one: a branch would mispredict).
    constexpr int64_t kBlock = 256;
    uint64_t draws[kBlock];
    const T values[2] = {T(0), T(keep_scale)};  // dropped, kept
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t b = std::min(kBlock, n - i0);
      for (int64_t j = 0; j < b; ++j) draws[j] = rng.engine()();
      for (int64_t j = 0; j < b; ++j) {
        const T mj = values[draws[j] >= keep_from];
        m[i0 + j] = mj;
        y[i0 + j] = x[i0 + j] * mj;
      }
    }
  });
  return record("dropout", std::move(Y), {X}, where)
      .formula([mask](const Tensor& dY) -> Grads { return {mul(dY, mask)}; })
      .jvp([&](const Tangents& t) { return mul(t[0], mask); });
}

}  // namespace tg
