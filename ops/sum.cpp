// sum: Y = sum_i X_i (all, or along one axis);  dX = broadcast_to(dY with the axis kept, X.shape)
// float32 accumulates in double (ops/accumulate.h).

#include "ops/sum.h"

#include "autograd/node.h"
#include "ops/accumulate.h"
#include "ops/broadcast_to.h"
#include "ops/op_util.h"
#include "ops/reshape.h"

namespace tg {

Tensor sum(const Tensor& X, const std::source_location& where) {
  detail::check_defined("sum", X, "input");
  Tensor Y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    Y.data<T>()[0] = static_cast<T>(detail::accumulate(X.data<T>(), X.numel()));
  });
  return record("sum", Y, {X}, where).formula([sX = X.shape()](const Tensor& dY) -> Grads {
    return {broadcast_to(dY, sX)};
  });
}

Tensor sum(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  detail::check_defined("sum", X, "input");
  const int ax = normalize_axis(axis, X.shape(), "sum");
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
    for (int64_t o = 0; o < outer; ++o)  // X as (outer, n, inner): sum over n
      detail::sum_rows(px + o * n * inner, n, inner, py + o * inner);
  });
  return record("sum", Y, {X}, where).formula([sX = s, kept = Shape(kept)](const Tensor& dY) -> Grads {
    return {broadcast_to(reshape(dY, kept.vec()), sX)};
  });
}

}  // namespace tg
