// tanh: Y = tanh X;  dX = dY * (1 - Y^2);  tY = tX * (1 - Y^2)

#include <tapegrad/ops/tanh.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>

namespace tg {

Tensor tanh(const Tensor& X, const std::source_location& where) {
  detail::check_floating("tanh", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    detail::MapArr<T>(Y.data<T>(), n) = detail::CMapArr<T>(X.data<T>(), n).tanh();
  });
  return record("tanh", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads {
        return {mul(dY, sub(scalar(1.0, Y.dtype()), mul(Y, Y)))};
      })
      .kernel([](const Tensor& dY, const Tensor& Y) -> Grads {  // one pass, no temporaries
        Tensor dX(Y.shape(), Y.dtype());
        dispatch(Y.dtype(), [&]<class T>() {
          const int64_t n = Y.numel();
          auto y = detail::CMapArr<T>(Y.data<T>(), n);
          detail::MapArr<T>(dX.data<T>(), n) = detail::CMapArr<T>(dY.data<T>(), n) * (T(1) - y * y);
        });
        return {dX};
      })
      .jvp([](const Tangents& t, const Tensor& Y) {
        return mul(t[0], sub(scalar(1.0, Y.dtype()), mul(Y, Y)));
      });
}

}  // namespace tg
