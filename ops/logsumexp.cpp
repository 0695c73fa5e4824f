// logsumexp: Y = m + log(sum_k exp(X_k - m)),  m = max_k X_k (0 where m is infinite, as PyTorch's,
//   so an axis of -inf gives log(0) = -inf and an inf entry gives inf);
//   dX = dY (kept as 1) * exp(X - Y): the softmax along the axis. Written with Y, it stays
//   differentiable (d exp(X - Y) brings in dY's own derivative). Where Y is infinite, X - Y is
//   NaN for the infinite entries, and so is the gradient, as PyTorch's.
//   tY = sum_k exp(X_k - Y) tX_k along the axis (the softmax-weighted tangent).
// float32 sums are accumulated in double.

#include <tapegrad/ops/logsumexp.h>

#include <cmath>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>

namespace tg {

Tensor logsumexp(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_floating("logsumexp", X);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, "logsumexp");
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    using A = detail::Accum<T>;
    detail::reduce_rows(X.data<T>(), r, Y.data<T>(), [&](const T* row, int64_t stride) {
      A m = -INFINITY;
      for (int64_t k = 0; k < r.n; ++k) m = std::fmax(m, A(row[k * stride]));  // NaN skipped: the sum gets it
      if (std::isinf(m)) m = 0;
      A s = 0;
      for (int64_t k = 0; k < r.n; ++k) s += std::exp(A(row[k * stride]) - m);
      return static_cast<T>(std::log(s) + m);
    });
  });
  return record("logsumexp", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, kept = r.kept](const Tensor& dY, const Tensor& Y) -> Grads {
        return {mul(reshape(dY, kept.vec()), exp(sub(X, reshape(Y, kept.vec()))))};
      })
      .jvp([&, kept = r.kept](const Tangents& t, const Tensor& Y) {
        return sum(mul(t[0], exp(sub(X, reshape(Y, kept.vec())))), axis, keepdim);
      });
}

}  // namespace tg
