// mul: Y = A * B (broadcasting);  dA = sum_to(dY * B, A.shape),  dB = sum_to(dY * A, B.shape);
//   tY = tA * B + A * tB

#include <tapegrad/ops/mul.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor mul(const Tensor& A, const Tensor& B, const std::source_location& where) {
  detail::check_floating("mul", A);
  Tensor Y = dispatch(A.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("mul", A, B, [](auto x, auto y) { return x * y; });
  });
  return record("mul", std::move(Y), {A, B}, where)
      .saves(A, B)
      .formula([A, B](const Tensor& dY) -> Grads {
        return {A.requires_grad() ? sum_to(mul(dY, B), A.shape()) : Tensor(),
                B.requires_grad() ? sum_to(mul(dY, A), B.shape()) : Tensor()};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return detail::tangent_sum(
            detail::tangent_term(t[0], [&](const Tensor& tA) { return mul(tA, B); }),
            detail::tangent_term(t[1], [&](const Tensor& tB) { return mul(A, tB); }), Y.shape());
      });
}

}  // namespace tg
