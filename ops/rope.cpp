// rope: for each pair (x0, x1) = (X[..., m, 2i], X[..., m, 2i+1]) and angle a = m base^(-2i/d_h)
//   Y0 = x0 cos a - x1 sin a,   Y1 = x0 sin a + x1 cos a        (Y = R(a) x)
//   dX = R(a)^T dY = R(-a) dY = rope(dY, base, !inverse);  tY = R(a) tX = rope(tX, base, inverse)

#include <tapegrad/ops/rope.h>

#include <cmath>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor rope(const Tensor& X, double base, bool inverse, const std::source_location& where) {
  detail::check_floating("rope", X);
  detail::check_min_rank("rope", X, 2);
  const int64_t T = X.size(-2), d_h = X.size(-1);
  if (d_h % 2 != 0)
    throw ShapeError("rope: the last axis pairs up entries and must be even, got shape " +
                     X.shape().str());
  if (!std::isfinite(base) || base <= 0)
    throw ValueError("rope: base must be finite and positive, got " + std::to_string(base));
  // cos and sin per (position, pair), computed in double for both dtypes.
  const int64_t P = d_h / 2;
  std::vector<double> c(T * P), s(T * P);
  for (int64_t m = 0; m < T; ++m)
    for (int64_t i = 0; i < P; ++i) {
      const double a = static_cast<double>(m) * std::pow(base, -2.0 * i / d_h);
      c[m * P + i] = std::cos(a);
      s[m * P + i] = inverse ? -std::sin(a) : std::sin(a);
    }
  Tensor Y(X.shape(), X.dtype());
  const int64_t rows = T * d_h != 0 ? X.numel() / (T * d_h) : 0;
  dispatch(X.dtype(), [&]<class T_>() {
    const T_* px = X.data<T_>();
    T_* py = Y.data<T_>();
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t m = 0; m < T; ++m) {
        const int64_t o = (b * T + m) * d_h;
        for (int64_t i = 0; i < P; ++i) {
          const double x0 = px[o + 2 * i], x1 = px[o + 2 * i + 1];
          const double cs = c[m * P + i], sn = s[m * P + i];
          py[o + 2 * i] = static_cast<T_>(x0 * cs - x1 * sn);
          py[o + 2 * i + 1] = static_cast<T_>(x0 * sn + x1 * cs);
        }
      }
  });
  return record("rope", std::move(Y), {X}, where)
      .formula([base, inverse](const Tensor& dY) -> Grads { return {rope(dY, base, !inverse)}; })
      .jvp([&](const Tangents& t) { return rope(t[0], base, inverse); });
}

}  // namespace tg
