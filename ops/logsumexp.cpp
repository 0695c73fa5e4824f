// logsumexp: Y = m + log(sum_k exp(X_k - m)),  m = max_k X_k (0 where m is infinite, as PyTorch's,
//   so an axis of -inf gives log(0) = -inf and an inf entry gives inf);
//   dX = dY (kept as 1) * exp(X - Y): the softmax along the axis. Written with Y, it stays
//   differentiable (d exp(X - Y) brings in dY's own derivative). Where Y is infinite, X - Y is
//   NaN for the infinite entries, and so is the gradient, as PyTorch's.
//   tY = sum_k exp(X_k - Y) tX_k along the axis (the softmax-weighted tangent).
// The exps are taken in the input's type (vectorised), their sums accumulated in double for
// float32.

#include <tapegrad/ops/logsumexp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/axis_columns.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/threads.h>

namespace tg {

Tensor logsumexp(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_floating("logsumexp", X);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, "logsumexp");
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    using A = detail::Accum<T>;
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    const int64_t n = r.n, slices = r.outer * r.inner;
    if (slices == 0) return;
    if (n == 0) {  // the empty sum: log(0)
      std::fill_n(y, slices, -std::numeric_limits<T>::infinity());
      return;
    }
    // A row's log-sum-exp, its exps by detail::exp_into (vectorised), in T, summed in A (e: n
    // entries of scratch).
    const auto row_lse = [n](const T* row, T* e) {
      const auto xs = detail::CMapArr<T>(row, n);
      T m = xs.maxCoeff();  // (with a NaN, m may or may not be NaN: the sum gets it)
      if (std::isinf(m)) m = 0;
      detail::MapArr<T>(e, n) = xs - m;
      detail::exp_into(e, e, n);
      return static_cast<T>(std::log(detail::accumulate(e, n)) + A(m));
    };
    if (r.inner == 1) {  // rows on the team
      detail::for_parts(
          r.outer,
          [&](int64_t begin, int64_t end) {
            Eigen::Array<T, Eigen::Dynamic, 1> e(n);
            for (int64_t o = begin; o < end; ++o) y[o] = row_lse(x + o * n, e.data());
          },
          detail::pass_serial_below(n));
      return;
    }
    if (r.inner < detail::kMinColumns) {  // a narrow slab: a slice at a time, as a row
      detail::for_slices<T>(r, 2, [&](int64_t start, T* rows) {
        detail::gather(x + start, n, r.inner, rows);
        const int64_t o = start / (n * r.inner), i = start % (n * r.inner);
        y[o * r.inner + i] = row_lse(rows, rows + n);
      });
      return;
    }
    // Another axis: the slabs' columns a block at a time (ops/axis_columns.h).
    detail::for_column_blocks<T>(r, [&](int64_t o, int64_t c, int64_t w) {
      alignas(64) T m[detail::kMaxColumnBlock], e[detail::kMaxColumnBlock];
      alignas(64) A s[detail::kMaxColumnBlock];
      const T* block = x + o * n * r.inner + c;
      detail::column_max(block, n, r.inner, w, m);
      for (int64_t j = 0; j < w; ++j)
        if (std::isinf(m[j])) m[j] = 0;
      detail::column_exp_sums(block, n, r.inner, w, m, e, 0, s);
      auto logs = Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>(s, w);
      logs = logs.log();  // (vectorised)
      for (int64_t j = 0; j < w; ++j) y[o * r.inner + c + j] = static_cast<T>(s[j] + A(m[j]));
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
