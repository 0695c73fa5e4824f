// exp: Y = e^X;  dX = dY * Y;  tY = tX * Y

#include <tapegrad/ops/exp.h>

#include <cmath>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor exp(const Tensor& X, const std::source_location& where) {
  detail::check_floating("exp", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    detail::MapArr<T>(y, n) = detail::CMapArr<T>(x, n).exp();
    // Eigen's vectorised exp clamps its argument, so exp(-inf) would come out a denormal rather
    // than 0 and exp(1000) finite rather than inf: the few entries past the clamp take std::exp.
    const T lo = std::is_same_v<T, float> ? T(-87) : T(-708), hi = -lo;
    for (int64_t i = 0; i < n; ++i)
      if (!(x[i] > lo && x[i] < hi)) y[i] = std::exp(x[i]);
  });
  return record("exp", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {mul(dY, Y)}; })
      .jvp([](const Tangents& t, const Tensor& Y) { return mul(t[0], Y); });
}

}  // namespace tg
