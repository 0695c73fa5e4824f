// clamp: Y = min(max(X, lo), hi);  dX = dY * [lo <= X <= hi];  tY = tX * [lo <= X <= hi]  (the
// bounds pass the gradient, as PyTorch's; the step is a constant: its own derivative is 0)

#include <tapegrad/ops/clamp.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

// [lo <= X <= hi]: a constant of the formula and the rule.
Tensor inside(const Tensor& X, double lo, double hi) {
  Tensor in(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    auto x = detail::CMapArr<T>(X.data<T>(), n);
    detail::MapArr<T>(in.data<T>(), n) = (x >= T(lo) && x <= T(hi)).template cast<T>();
  });
  return in;
}

}  // namespace

Tensor clamp(const Tensor& X, double lo, double hi, const std::source_location& where) {
  detail::check_floating("clamp", X);
  if (std::isnan(lo) || std::isnan(hi) || lo > hi)
    throw ValueError("clamp: needs lo <= hi, got lo = " + std::to_string(lo) + ", hi = " +
                     std::to_string(hi) + " for input " + X.shape().str());
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    auto x = detail::CMapArr<T>(X.data<T>(), n);
    // select, not min/max: NaN stays NaN, as PyTorch's
    detail::MapArr<T>(Y.data<T>(), n) =
        (x < T(lo)).select(T(lo), (x > T(hi)).select(T(hi), x));
  });
  return record("clamp", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, lo, hi](const Tensor& dY) -> Grads { return {mul(dY, inside(X, lo, hi))}; })
      .jvp([&](const Tangents& t) { return mul(t[0], inside(X, lo, hi)); });
}

}  // namespace tg
