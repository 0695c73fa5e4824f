// sigmoid: Y = 1 / (1 + exp(-X));  dX = dY * Y * (1 - Y);  tY = tX * Y * (1 - Y)

#include <tapegrad/ops/sigmoid.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>

namespace tg {

Tensor sigmoid(const Tensor& X, const std::source_location& where) {
  detail::check_floating("sigmoid", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    // exp(-X) overflows to inf for X < -745 (float64), and 1 / inf is the exact limit 0.
    detail::MapArr<T>(Y.data<T>(), n) =
        (T(1) + (-detail::CMapArr<T>(X.data<T>(), n)).exp()).inverse();
  });
  return record("sigmoid", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads {
        return {mul(dY, mul(Y, sub(1.0, Y)))};
      })
      .kernel([](const Tensor& dY, const Tensor& Y) -> Grads {  // one pass, no temporaries
        Tensor dX(Y.shape(), Y.dtype());
        dispatch(Y.dtype(), [&]<class T>() {
          const int64_t n = Y.numel();
          auto y = detail::CMapArr<T>(Y.data<T>(), n);
          detail::MapArr<T>(dX.data<T>(), n) = detail::CMapArr<T>(dY.data<T>(), n) * (y * (T(1) - y));
        });
        return {dX};
      })
      .jvp([](const Tangents& t, const Tensor& Y) { return mul(t[0], mul(Y, sub(1.0, Y))); });
}

}  // namespace tg
