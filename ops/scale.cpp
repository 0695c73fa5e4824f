// scale: Y = c X;  dX = c dY;  tY = c tX

#include <tapegrad/ops/scale.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor scale(const Tensor& X, double c, const std::source_location& where) {
  detail::check_floating("scale", X);
  detail::check_defined("scale", X, "input");
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    detail::MapArr<T>(Y.data<T>(), n) = detail::CMapArr<T>(X.data<T>(), n) * static_cast<T>(c);
  });
  return record("scale", std::move(Y), {X}, where)
      .formula([c](const Tensor& dY) -> Grads { return {scale(dY, c)}; })
      .jvp([&](const Tangents& t) { return scale(t[0], c); });
}

}  // namespace tg
