// log: Y = ln X;  dX = dY / X;  tY = tX / X

#include <tapegrad/ops/log.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/div.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor log(const Tensor& X, const std::source_location& where) {
  detail::check_floating("log", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    detail::MapArr<T>(Y.data<T>(), n) = detail::CMapArr<T>(X.data<T>(), n).log();
  });
  return record("log", std::move(Y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads { return {div(dY, X)}; })
      .jvp([&](const Tangents& t) { return div(t[0], X); });
}

}  // namespace tg
