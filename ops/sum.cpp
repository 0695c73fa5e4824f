// sum: Y = sum_i X_i (all, along one axis, or over several);
//   dX = broadcast_to(dY with the reduced axes kept as 1, X.shape);  tY = sum(tX), likewise
// float32 accumulates in double (ops/accumulate.h).

#include <tapegrad/ops/sum.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/broadcast_to.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>

namespace tg {

Tensor sum(const Tensor& X, const std::source_location& where) {
  detail::check_floating("sum", X);
  detail::check_defined("sum", X, "input");
  Tensor Y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    Y.data<T>()[0] = static_cast<T>(detail::accumulate(X.data<T>(), X.numel()));
  });
  return record("sum", std::move(Y), {X}, where)
      .formula([sX = X.shape()](const Tensor& dY) -> Grads { return {broadcast_to(dY, sX)}; })
      .jvp([](const Tangents& t) { return sum(t[0]); });
}

Tensor sum(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_floating("sum", X);
  detail::check_defined("sum", X, "input");
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, "sum");
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() { detail::sum_axis(X.data<T>(), r, Y.data<T>()); });
  return record("sum", std::move(Y), {X}, where)
      .formula([sX = X.shape(), kept = r.kept](const Tensor& dY) -> Grads {
        return {broadcast_to(reshape(dY, kept.vec()), sX)};
      })
      .jvp([&](const Tangents& t) { return sum(t[0], axis, keepdim); });
}

Tensor sum(const Tensor& X, const std::vector<int>& dims, bool keepdim,
           const std::source_location& where) {
  detail::check_floating("sum", X);
  detail::check_defined("sum", X, "input");
  const detail::AxesReduction r = detail::axes_reduction(X.shape(), dims, keepdim, "sum");
  if (dims.size() == 1) return sum(X, dims[0], keepdim, where);  // the one-axis kernel
  Tensor Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() { detail::sum_axes(X.data<T>(), r, Y.data<T>()); });
  return record("sum", std::move(Y), {X}, where)
      .formula([sX = X.shape(), kept = r.kept](const Tensor& dY) -> Grads {
        return {broadcast_to(reshape(dY, kept.vec()), sX)};
      })
      .jvp([&](const Tangents& t) { return sum(t[0], dims, keepdim); });
}

}  // namespace tg
