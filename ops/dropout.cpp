// dropout: Y = X * M,  M_i = [u_i >= p] / (1 - p) with u_i ~ U[0, 1) from the rng;  dX = dY * M;
//   tY = tX * M
// p = 1 drops everything: M = 0 (not 0 / 0). In eval or with p = 0, Y is X itself.

#include <tapegrad/ops/dropout.h>

#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

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
  Tensor mask(X.shape(), X.dtype());
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    T* m = mask.data<T>();
    for (int64_t i = 0; i < n; ++i) m[i] = rng.uniform(0.0, 1.0) >= p ? T(keep_scale) : T(0);
    detail::MapArr<T>(Y.data<T>(), n) =
        detail::CMapArr<T>(X.data<T>(), n) * detail::CMapArr<T>(m, n);
  });
  return record("dropout", std::move(Y), {X}, where)
      .formula([mask](const Tensor& dY) -> Grads { return {mul(dY, mask)}; })
      .jvp([&](const Tangents& t) { return mul(t[0], mask); });
}

}  // namespace tg
