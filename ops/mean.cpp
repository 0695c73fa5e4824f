// mean: Y = sum_i X_i / n (all, or along one axis of size n);
//   dX = broadcast_to(dY / n with the axis kept, X.shape)
// float32 sums are accumulated in double, so the mean of 2e7 float ones is exactly 1.

#include "ops/mean.h"

#include "autograd/node.h"
#include "ops/broadcast_to.h"
#include "ops/op_util.h"
#include "ops/reshape.h"
#include "ops/scale.h"

namespace tg {

Tensor mean(const Tensor& X, const std::source_location& where) {
  detail::check_floating("mean", X);
  const int64_t n = X.numel();
  Tensor Y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const double s = detail::CMapArr<T>(X.data<T>(), n).template cast<double>().sum();
    Y.data<T>()[0] = static_cast<T>(s / static_cast<double>(n));  // 0 / 0 = NaN when empty
  });
  return record("mean", Y, {X}, where).formula([sX = X.shape(), n](const Tensor& dY) -> Grads {
    return {broadcast_to(scale(dY, 1.0 / static_cast<double>(n)), sX)};
  });
}

Tensor mean(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_floating("mean", X);
  const int ax = normalize_axis(axis, X.shape(), "mean");
  const Shape& s = X.shape();
  std::vector<int64_t> kept = s.vec(), dropped;
  kept[ax] = 1;
  for (int i = 0; i < s.rank(); ++i)
    if (i != ax) dropped.push_back(s[i]);
  Tensor Y(keepdim ? Shape(kept) : Shape(dropped), X.dtype());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= s[i];
  for (int i = ax + 1; i < s.rank(); ++i) inner *= s[i];
  const int64_t n = s[ax];
  dispatch(X.dtype(), [&]<class T>() {
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    Eigen::Array<double, Eigen::Dynamic, 1> acc(inner);
    for (int64_t o = 0; o < outer; ++o) {
      acc.setZero();
      for (int64_t k = 0; k < n; ++k)
        acc += detail::CMapArr<T>(px + (o * n + k) * inner, inner).template cast<double>();
      detail::MapArr<T>(py + o * inner, inner) = (acc / static_cast<double>(n)).template cast<T>();
    }
  });
  return record("mean", Y, {X}, where)
      .formula([sX = s, kept = Shape(kept), n](const Tensor& dY) -> Grads {
        return {broadcast_to(reshape(scale(dY, 1.0 / static_cast<double>(n)), kept.vec()), sX)};
      });
}

}  // namespace tg
