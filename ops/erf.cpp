// erf: Y = 2/sqrt(pi) int_0^X exp(-t^2) dt;  dX = dY 2/sqrt(pi) exp(-X^2);
//   tY = tX 2/sqrt(pi) exp(-X^2)

#include <tapegrad/ops/erf.h>

#include <cmath>
#include <numbers>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>

namespace tg {

Tensor erf(const Tensor& X, const std::source_location& where) {
  detail::check_floating("erf", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    for (int64_t i = 0, n = X.numel(); i < n; ++i) y[i] = std::erf(x[i]);
  });
  return record("erf", std::move(Y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads {
        return {mul(dY, scale(exp(scale(mul(X, X), -1.0)), 2.0 / std::sqrt(std::numbers::pi)))};
      })
      .jvp([&](const Tangents& t) {
        return mul(t[0], scale(exp(scale(mul(X, X), -1.0)), 2.0 / std::sqrt(std::numbers::pi)));
      });
}

}  // namespace tg
