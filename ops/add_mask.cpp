// add_mask: Y = X + M (M constant, broadcast over leading axes);  dX = dY

#include "ops/add_mask.h"

#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "ops/elementwise.h"

namespace tg {

Tensor add_mask(const Tensor& X, const Tensor& M, const std::source_location& where) {
  detail::check_same_dtype("add_mask", X, M);
  if (broadcast_shapes(X.shape(), M.shape(), "add_mask") != X.shape())
    throw ShapeError("add_mask: mask " + M.shape().str() + " does not broadcast to input " +
                     X.shape().str());
  if (M.requires_grad())
    throw ValueError("add_mask: the mask " + M.shape().str() +
                     " is a constant and must not require grad");
  Tensor Y = dispatch(X.dtype(), [&]<class T>() {
    const T* m = M.data<T>();
    for (int64_t i = 0; i < M.numel(); ++i)
      if (std::isnan(m[i]) || m[i] == std::numeric_limits<T>::infinity())
        throw ValueError("add_mask: mask " + M.shape().str() + " holds " +
                         (std::isnan(m[i]) ? "NaN" : "+inf") + " at element " +
                         std::to_string(i) + "; use 0 and -inf");
    return detail::broadcast_binary<T>("add_mask", X, M, [](auto x, auto y) { return x + y; });
  });
  return record("add_mask", Y, {X}, [](const Tensor& dY) -> Grads { return {dY}; }, where);
}

Tensor causal_mask(int64_t T, Dtype dtype, int64_t window) {
  if (T < 1) throw ValueError("causal_mask: T must be at least 1, got " + std::to_string(T));
  if (window < 0)
    throw ValueError("causal_mask: window must be at least 1 (or 0 for none), got " +
                     std::to_string(window));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> m(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (j > i || (window > 0 && j <= i - window)) m[i * T + j] = -inf;
  return from_vector(m, Shape{T, T}, dtype);
}

}  // namespace tg
