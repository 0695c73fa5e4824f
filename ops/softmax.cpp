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

namespace tg {

namespace {

// One slice x -> y (contiguous for the last axis, strided otherwise).
template <class T, class In, class Out>
void softmax_slice(const In& x, Out&& y) {
  const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
  if (std::isnan(mx)) {  // NaN in, NaN out: the whole slice, as IEEE arithmetic would have it
    y.setConstant(std::numeric_limits<T>::quiet_NaN());
    return;
  }
  if (mx == -std::numeric_limits<T>::infinity()) {
    y.setZero();
    return;
  }
  // Eigen's vectorised exp clamps its argument and returns a denormal for -inf, so masked
  // entries are set to exactly 0 here rather than trusted to underflow.
  const T ninf = -std::numeric_limits<T>::infinity();
  y = (x == ninf).select(T(0), (x - mx).exp());
  y /= y.sum();
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
    if (r.inner == 1) {  // the last axis (or only size-1 axes after it): contiguous slices
      for (int64_t o = 0; o < r.outer; ++o)
        softmax_slice<T>(detail::CMapArr<T>(X.data<T>() + o * n, n),
                         detail::MapArr<T>(Y.data<T>() + o * n, n));
      return;
    }
    using Stride = Eigen::InnerStride<Eigen::Dynamic>;
    using Col = Eigen::Array<T, Eigen::Dynamic, 1>;
    for (int64_t o = 0; o < r.outer; ++o)
      for (int64_t i = 0; i < r.inner; ++i) {
        const int64_t at = o * n * r.inner + i;
        softmax_slice<T>(Eigen::Map<const Col, 0, Stride>(X.data<T>() + at, n, Stride(r.inner)),
                         Eigen::Map<Col, 0, Stride>(Y.data<T>() + at, n, Stride(r.inner)));
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
