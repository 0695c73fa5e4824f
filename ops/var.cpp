// var: Y = sum_k (X_k - mean)^2 / max(n - correction, 0);
//   dX = dY (kept as 1) * 2 (X - mean(X)) / (n - correction);
//   tY = sum_k 2 (X_k - mean(X)) tX_k / (n - correction)
// (the mean's own derivative drops out: sum_k (X_k - mean) = 0). PyTorch's backward divides by
// n - correction unclamped, so past n it is finite while the value is inf: this does the same. The formula recomputes the
// mean from X with tg ops, so it is differentiable again. Two passes over the axis (the mean,
// then the squared deviations), accumulated in double for float32.

#include <tapegrad/ops/var.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/mean.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>

namespace tg {

Tensor var(const Tensor& X, int axis, double correction, bool keepdim,
           const std::source_location& where) {
  detail::check_floating("var", X);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, "var");
  if (!(correction >= 0))
    throw ValueError("var: correction must be non-negative, got " + std::to_string(correction) +
                     " for shape " + X.shape().str());
  const double dof = static_cast<double>(r.n) - correction, d = std::max(dof, 0.0);
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    using A = detail::Accum<T>;
    detail::reduce_rows(X.data<T>(), r, Y.data<T>(), [&](const T* row, int64_t stride) {
      A m = 0, s = 0;
      for (int64_t k = 0; k < r.n; ++k) m += row[k * stride];
      m /= static_cast<A>(r.n);
      for (int64_t k = 0; k < r.n; ++k) s += (row[k * stride] - m) * (row[k * stride] - m);
      return static_cast<T>(s / static_cast<A>(d));
    });
  });
  const int ax = normalize_axis(axis, X.shape(), "var");
  return record("var", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, ax, dof, kept = r.kept](const Tensor& dY) -> Grads {
        return {mul(reshape(dY, kept.vec()), scale(sub(X, mean(X, ax, true)), 2.0 / dof))};
      })
      .jvp([&](const Tangents& t) {
        return sum(mul(scale(sub(X, mean(X, ax, true)), 2.0 / dof), t[0]), ax, keepdim);
      });
}

}  // namespace tg
