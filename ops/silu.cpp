// silu: Y = X s,  s = sigmoid(X);  dX = dY * s * (1 + X (1 - s));  tY = tX * s * (1 + X (1 - s))

#include <tapegrad/ops/silu.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sigmoid.h>

namespace tg {

Tensor silu(const Tensor& X, const std::source_location& where) {
  detail::check_floating("silu", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    auto x = detail::CMapArr<T>(X.data<T>(), n);
    detail::MapArr<T>(Y.data<T>(), n) = x / (T(1) + (-x).exp());  // as PyTorch writes it
  });
  return record("silu", std::move(Y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads {
        const Tensor s = sigmoid(X);
        return {mul(dY, mul(s, add(mul(X, sub(1.0, s)), 1.0)))};
      })
      .kernel([X](const Tensor& dY) -> Grads {  // one pass, s recomputed per element
        Tensor dX(X.shape(), X.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          const int64_t n = X.numel();
          auto x = detail::CMapArr<T>(X.data<T>(), n);
          const auto s = (T(1) + (-x).exp()).inverse();
          detail::MapArr<T>(dX.data<T>(), n) =
              detail::CMapArr<T>(dY.data<T>(), n) * (s * (x * (T(1) - s) + T(1)));
        });
        return {dX};
      })
      .jvp([&](const Tangents& t) {
        const Tensor s = sigmoid(X);
        return mul(t[0], mul(s, add(mul(X, sub(1.0, s)), 1.0)));
      });
}

}  // namespace tg
