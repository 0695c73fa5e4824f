// softmax: Y = exp(X - max) / sum(exp(X - max)) along dim;  dX = Y * (dY - sum(dY * Y, dim));
//   tY = Y * (tX - sum(tX * Y, dim))
// A fully masked slice (max = -inf) is defined as all zeros; then Y = 0 makes dX = 0 as well.

#include <tapegrad/ops/softmax.h>

#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

// One contiguous slice x -> y (y may be x).
template <class T>
void softmax_slice(const T* px, T* py, int64_t n) {
  const auto x = detail::CMapArr<T>(px, n);
  auto y = detail::MapArr<T>(py, n);
  const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
  if (std::isnan(mx)) {  // NaN in, NaN out: the whole slice, as IEEE arithmetic would have it
    y.setConstant(std::numeric_limits<T>::quiet_NaN());
    return;
  }
  if (mx == -std::numeric_limits<T>::infinity()) {
    y.setZero();
    return;
  }
  // exp_into gives masked (-inf) entries exactly 0, and is vectorised (an Eigen select around
  // the exp went entry by entry through glibc's exp: 5 times PyTorch's time).
  y = x - mx;
  detail::exp_into(py, py, n);
  y /= detail::row_sum(py, n);  // (the same order wherever the row starts)
}

}  // namespace

Tensor softmax(const Tensor& X, int dim, const std::source_location& where) {
  detail::check_floating("softmax", X);
  detail::check_min_rank("softmax", X, 1);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), dim, true, "softmax");
  Tensor Y(X.shape(), X.dtype());
  const int64_t n = r.n;
  dispatch(X.dtype(), [&]<class T>() {
    if (X.numel() == 0) return;
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    if (r.inner == 1) {  // the last axis (or only size-1 axes after it): contiguous slices
      detail::for_parts(
          r.outer,
          [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) softmax_slice<T>(x + o * n, y + o * n, n);
          },
          detail::pass_serial_below(n));
      return;
    }
    // Another axis: each slice gathered into a contiguous row, and scattered back (Eigen's own
    // array: aligned alike on every call, so its sum takes the same order).
    Eigen::Array<T, Eigen::Dynamic, 1> row(n);
    for (int64_t o = 0; o < r.outer; ++o)
      for (int64_t i = 0; i < r.inner; ++i) {
        const int64_t at = o * n * r.inner + i;
        for (int64_t k = 0; k < n; ++k) row[k] = x[at + k * r.inner];
        softmax_slice<T>(row.data(), row.data(), n);
        for (int64_t k = 0; k < n; ++k) y[at + k * r.inner] = row[k];
      }
  });
  return record("softmax", std::move(Y), {X}, where)
      .formula([dim](const Tensor& dY, const Tensor& Y) -> Grads {
        return {mul(Y, sub(dY, sum(mul(dY, Y), dim, true)))};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return mul(Y, sub(t[0], sum(mul(t[0], Y), dim, true)));
      });
}

}  // namespace tg
