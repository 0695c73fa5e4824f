// pow: Y = X^p;  dX = dY * p X^(p - 1);  tY = tX * p X^(p - 1)  (p = 0: dX = 0 * dY; at X = 0
// with p < 1 the slope is inf, as PyTorch's, which has no special case for a scalar exponent)

#include <tapegrad/ops/pow.h>

#include <cmath>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>

namespace tg {

Tensor pow(const Tensor& X, double p, const std::source_location& where) {
  detail::check_floating("pow", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    auto x = detail::CMapArr<T>(X.data<T>(), n);
    auto y = detail::MapArr<T>(Y.data<T>(), n);
    if (p == 2)
      y = x * x;  // PyTorch's special cases, to round alike
    else if (p == 0.5)
      y = x.sqrt();
    else
      y = x.pow(T(p));
  });
  return record("pow", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, p](const Tensor& dY) -> Grads {
        if (p == 0) return {mul(dY, 0.0)};
        if (p == 1) return {dY};
        return {mul(dY, scale(pow(X, p - 1), p))};
      })
      .jvp([&](const Tangents& t) -> Tensor {
        if (p == 0) return mul(t[0], 0.0);
        if (p == 1) return t[0];
        return mul(t[0], scale(pow(X, p - 1), p));
      });
}

}  // namespace tg
