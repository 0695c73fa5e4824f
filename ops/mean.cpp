// mean: Y = sum_i X_i / n (all, along one axis of size n, or over axes of n elements in all);
//   dX = broadcast_to(dY / n with the reduced axes kept as 1, X.shape);  tY = mean(tX), likewise
// float32 sums are accumulated in double, so the mean of 2e7 float ones is exactly 1.

#include <tapegrad/ops/mean.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/broadcast_to.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/scale.h>

namespace tg {

Tensor mean(const Tensor& X, const std::source_location& where) {
  detail::check_floating("mean", X);
  const int64_t n = X.numel();
  Tensor Y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const double s = detail::accumulate(X.data<T>(), n);
    Y.data<T>()[0] = static_cast<T>(s / static_cast<double>(n));  // 0 / 0 = NaN when empty
  });
  return record("mean", std::move(Y), {X}, where)
      .formula([sX = X.shape(), n](const Tensor& dY) -> Grads {
        return {broadcast_to(scale(dY, 1.0 / static_cast<double>(n)), sX)};
      })
      .jvp([](const Tangents& t) { return mean(t[0]); });
}

Tensor mean(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_floating("mean", X);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, "mean");
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    detail::sum_axis(X.data<T>(), r, Y.data<T>(), detail::Accum<T>(1) / detail::Accum<T>(r.n));
  });
  return record("mean", std::move(Y), {X}, where)
      .formula([sX = X.shape(), kept = r.kept, n = r.n](const Tensor& dY) -> Grads {
        return {broadcast_to(reshape(scale(dY, 1.0 / static_cast<double>(n)), kept.vec()), sX)};
      })
      .jvp([&](const Tangents& t) { return mean(t[0], axis, keepdim); });
}

Tensor mean(const Tensor& X, const std::vector<int>& dims, bool keepdim,
            const std::source_location& where) {
  detail::check_floating("mean", X);
  const detail::AxesReduction r = detail::axes_reduction(X.shape(), dims, keepdim, "mean");
  if (dims.size() == 1) return mean(X, dims[0], keepdim, where);  // the one-axis kernel
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    detail::sum_axes(X.data<T>(), r, Y.data<T>(), detail::Accum<T>(1) / detail::Accum<T>(r.n));
  });
  return record("mean", std::move(Y), {X}, where)
      .formula([sX = X.shape(), kept = r.kept, n = r.n](const Tensor& dY) -> Grads {
        return {broadcast_to(reshape(scale(dY, 1.0 / static_cast<double>(n)), kept.vec()), sX)};
      })
      .jvp([&](const Tangents& t) { return mean(t[0], dims, keepdim); });
}

}  // namespace tg
