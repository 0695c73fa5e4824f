// sqrt:  Y = X^(1/2);   dX = dY / (2 Y);    tY = tX / (2 Y)
// rsqrt: Y = X^(-1/2);  dX = -dY Y^3 / 2;  tY = -tX Y^3 / 2

#include <tapegrad/ops/sqrt.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/div.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>

namespace tg {

Tensor sqrt(const Tensor& X, const std::source_location& where) {
  detail::check_floating("sqrt", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    detail::MapArr<T>(Y.data<T>(), n) = detail::CMapArr<T>(X.data<T>(), n).sqrt();
  });
  return record("sqrt", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {div(scale(dY, 0.5), Y)}; })
      .jvp([](const Tangents& t, const Tensor& Y) { return div(scale(t[0], 0.5), Y); });
}

Tensor rsqrt(const Tensor& X, const std::source_location& where) {
  detail::check_floating("rsqrt", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    // 1 / sqrt rather than Eigen's rsqrt, which may use the approximate hardware instruction.
    detail::MapArr<T>(Y.data<T>(), n) = T(1) / detail::CMapArr<T>(X.data<T>(), n).sqrt();
  });
  return record("rsqrt", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads {
        return {scale(mul(dY, mul(Y, mul(Y, Y))), -0.5)};
      })
      .jvp([](const Tangents& t, const Tensor& Y) {
        return scale(mul(t[0], mul(Y, mul(Y, Y))), -0.5);
      });
}

}  // namespace tg
