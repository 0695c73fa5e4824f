// rotary: per position t and pair i < d/2 of each head, with c = cos[t, i], s = sin[t, i],
//   (y1, y2) = R (x1, x2),  R = [[c, -s], [s, c]]   (x1 = x[i], x2 = x[i + d/2])
//   dX = R^T dY = rotary(dY, cos, -sin)              (the rotation by the opposite angle)
//   tY = R tX = rotary(tX, cos, sin)
// Linear in x; the tables are constants.

#include <tapegrad/ops/rotary.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>

namespace tg {

Tensor rotary(const Tensor& X, const Tensor& cos, const Tensor& sin,
              const std::source_location& where) {
  detail::check_floating("rotary", X);
  detail::check_same_dtype("rotary", X, cos);
  detail::check_same_dtype("rotary", X, sin);
  if (cos.requires_grad() || sin.requires_grad() || detail::tangent_of(cos).defined() ||
      detail::tangent_of(sin).defined())
    throw ValueError("rotary: the tables cos " + cos.shape().str() + " and sin " + sin.shape().str() +
                     " are constants here (no gradient or tangent flows to them); pass them detached");
  detail::check_min_rank("rotary", X, 3);
  const int64_t T = X.size(-3), H = X.size(-2), d = X.size(-1), half = d / 2;
  if (d % 2 != 0)
    throw ShapeError("rotary: the last axis pairs its halves and must be even, got x " +
                     X.shape().str());
  const Shape table{T, half};
  if (!(cos.shape() == table) || !(sin.shape() == table))
    throw ShapeError("rotary: cos " + cos.shape().str() + " and sin " + sin.shape().str() +
                     " must be (T, d/2) = " + table.str() + " for x " + X.shape().str());
  Tensor Y(X.shape(), X.dtype());
  const int64_t rows = T * H * d != 0 ? X.numel() / (T * H * d) : 0;
  dispatch(X.dtype(), [&]<class T_>() {
    const T_* px = X.data<T_>();
    const T_* pc = cos.data<T_>();
    const T_* ps = sin.data<T_>();
    T_* py = Y.data<T_>();
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const T_* c = pc + t * half;
        const T_* s = ps + t * half;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t o = ((b * T + t) * H + h) * d;
          for (int64_t i = 0; i < half; ++i) {
            const T_ x1 = px[o + i], x2 = px[o + half + i];
            py[o + i] = x1 * c[i] - x2 * s[i];
            py[o + half + i] = x2 * c[i] + x1 * s[i];
          }
        }
      }
  });
  return record("rotary", std::move(Y), {X}, where)
      .formula([cos, sin](const Tensor& dY) -> Grads {
        return {rotary(dY, cos, scale(sin, -1.0))};
      })
      .jvp([&](const Tangents& t) { return rotary(t[0], cos, sin); });
}

}  // namespace tg
