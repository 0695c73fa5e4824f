// amax: Y = max_k X[o, k, i] (X seen as (outer, n, inner); NaN if the axis holds a NaN);
//   dX = dY (kept as 1) * S,  S = (X == Y) / count(X == Y along the axis);
//   tY = sum_k S tX along the axis (the mean of the tied entries' tangents)
// S shares the gradient evenly between ties, as PyTorch's amax (where Y is NaN, S is 0 / 0 =
// NaN along the whole axis, as PyTorch's). S is a constant: the second derivative through
// it is 0, and dX is linear in dY. amin likewise with the smallest entry.

#include <tapegrad/ops/amax.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/max.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum.h>

namespace tg {

namespace {

Tensor extreme_value(const char* op, const Tensor& X, int axis, bool keepdim, bool largest,
                     const std::source_location& where) {
  detail::check_floating(op, X);
  const Tensor idx = detail::extreme_indices(op, X, axis, keepdim, largest);  // checks X and axis
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, op);
  Tensor Y(r.out, X.dtype()), S(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    const int64_t* k = idx.data<int64_t>();
    T* y = Y.data<T>();
    T* s = S.data<T>();
    for (int64_t o = 0; o < r.outer; ++o)
      for (int64_t i = 0; i < r.inner; ++i) {
        const int64_t base = o * r.n * r.inner + i;
        const T best = x[base + k[o * r.inner + i] * r.inner];
        int64_t count = 0;
        for (int64_t j = 0; j < r.n; ++j) count += x[base + j * r.inner] == best;
        for (int64_t j = 0; j < r.n; ++j)
          s[base + j * r.inner] = static_cast<T>(x[base + j * r.inner] == best) / static_cast<T>(count);
        y[o * r.inner + i] = best;
      }
  });
  return record(op, std::move(Y), {X}, where)
      .formula([S, kept = r.kept](const Tensor& dY) -> Grads {
        return {mul(reshape(dY, kept.vec()), S)};
      })
      .jvp([&](const Tangents& t) { return sum(mul(t[0], S), axis, keepdim); });
}

}  // namespace

Tensor amax(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  return extreme_value("amax", X, axis, keepdim, true, where);
}
Tensor amin(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  return extreme_value("amin", X, axis, keepdim, false, where);
}

}  // namespace tg
