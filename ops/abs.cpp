// abs: Y = |X|;  dX = dY * sign(X);  tY = tX * sign(X),  sign(0) = 0 as PyTorch's (the sign is
// a constant: its own derivative is 0)

#include <tapegrad/ops/abs.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

// sign(X), sign(0) = 0: a constant of the formula and the rule.
Tensor sign_of(const Tensor& X) {
  Tensor sign(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    auto x = detail::CMapArr<T>(X.data<T>(), n);
    detail::MapArr<T>(sign.data<T>(), n) =
        (x > T(0)).template cast<T>() - (x < T(0)).template cast<T>();
  });
  return sign;
}

}  // namespace

Tensor abs(const Tensor& X, const std::source_location& where) {
  detail::check_floating("abs", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    detail::MapArr<T>(Y.data<T>(), n) = detail::CMapArr<T>(X.data<T>(), n).abs();
  });
  return record("abs", std::move(Y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads { return {mul(dY, sign_of(X))}; })
      .jvp([&](const Tangents& t) { return mul(t[0], sign_of(X)); });
}

}  // namespace tg
