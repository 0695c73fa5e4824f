// div: Y = A / B (broadcasting);  dA = sum_to(dY / B, A.shape),
//                                  dB = -sum_to(dY A / B^2, B.shape) = -sum_to((dY / B) Y, B.shape)
//   tY = tA / B - tB A / B^2 = (tA - Y tB) / B

#include <tapegrad/ops/div.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor div(const Tensor& A, const Tensor& B, const std::source_location& where) {
  detail::check_same_dtype("div", A, B);
  detail::check_floating("div", A);
  Tensor Y = dispatch(A.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("div", A, B, [](auto x, auto y) { return x / y; });
  });
  return record("div", std::move(Y), {A, B}, where)
      .saves(B)
      .formula(
          [B, sA = A.shape(), da = A.requires_grad()](const Tensor& dY, const Tensor& Y) -> Grads {
            const Tensor g = div(dY, B);  // dY / B, the shape of Y
            return {da ? sum_to(g, sA) : Tensor(),
                    B.requires_grad() ? scale(sum_to(mul(g, Y), B.shape()), -1.0) : Tensor()};
          })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        const Tensor minus_YtB =
            detail::tangent_term(t[1], [&](const Tensor& tB) { return scale(mul(Y, tB), -1.0); });
        return detail::tangent_term(detail::tangent_sum(t[0], minus_YtB, Y.shape()),
                                    [&](const Tensor& tN) { return div(tN, B); });
      });
}

}  // namespace tg
