// l1_loss: E = |X - Y|,  L = reduce(E) (none, sum, or mean over N elements);
//   dX = dL * sign(X - Y) f,  dY = -dX,  f = 1 / N for the mean, else 1;  sign(0) = 0 (PyTorch's);
//   tL = sum(sign(X - Y) f (tX - tY))   (the elementwise terms themselves for none)
// The sign is a constant: its own derivative is 0.

#include <tapegrad/ops/l1_loss.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor l1_loss(const Tensor& X, const Tensor& Y, Reduction reduction,
               const std::source_location& where) {
  detail::check_pointwise_loss("l1_loss", X, Y);
  const int64_t n = X.numel();
  Tensor E(X.shape(), X.dtype()), sign(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const Eigen::Array<T, Eigen::Dynamic, 1> d =
        detail::CMapArr<T>(X.data<T>(), n) - detail::CMapArr<T>(Y.data<T>(), n);
    detail::MapArr<T>(E.data<T>(), n) = d.abs();
    detail::MapArr<T>(sign.data<T>(), n) =
        (d > T(0)).template cast<T>() - (d < T(0)).template cast<T>();
  });
  const double f = detail::reduction_factor(reduction, n);
  return record("l1_loss", detail::reduce_loss(E, reduction), {X, Y}, where)
      .saves(X, Y)
      .formula([X, Y, sign, f](const Tensor& dL) -> Grads {
        const Tensor dX = mul(dL, scale(sign, f));
        return detail::difference_grads(X, Y, dX);
      })
      .jvp([&](const Tangents& t) {
        const Tensor minus_tY = detail::tangent_term(t[1], [](const Tensor& tY) { return -tY; });
        const Tensor tE = mul(scale(sign, f), detail::tangent_sum(t[0], minus_tY, X.shape()));
        return reduction == Reduction::none ? tE : sum(tE);
      });
}

}  // namespace tg
