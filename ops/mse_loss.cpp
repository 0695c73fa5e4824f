// mse_loss: E = (X - Y)^2,  L = reduce(E) (none, sum, or mean over N elements);
//   dX = dL * 2 (X - Y) f,  dY = -dX,  f = 1 / N for the mean, else 1 (dL broadcasts for sum and
//   mean);  tL = sum(2 (X - Y) f (tX - tY))   (the elementwise terms themselves for none)

#include <tapegrad/ops/mse_loss.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor mse_loss(const Tensor& X, const Tensor& Y, Reduction reduction,
                const std::source_location& where) {
  detail::check_pointwise_loss("mse_loss", X, Y);
  Tensor E(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    const auto d = detail::CMapArr<T>(X.data<T>(), n) - detail::CMapArr<T>(Y.data<T>(), n);
    detail::MapArr<T>(E.data<T>(), n) = d * d;
  });
  const double f = 2 * detail::reduction_factor(reduction, X.numel());
  return record("mse_loss", detail::reduce_loss(E, reduction), {X, Y}, where)
      .saves(X, Y)
      .formula([X, Y, f](const Tensor& dL) -> Grads {
        const Tensor dX = mul(dL, scale(sub(X, Y), f));
        return detail::difference_grads(X, Y, dX);
      })
      .jvp([&](const Tangents& t) {
        const Tensor minus_tY = detail::tangent_term(t[1], [](const Tensor& tY) { return -tY; });
        const Tensor tE = mul(scale(sub(X, Y), f), detail::tangent_sum(t[0], minus_tY, X.shape()));
        return reduction == Reduction::none ? tE : sum(tE);
      });
}

}  // namespace tg
