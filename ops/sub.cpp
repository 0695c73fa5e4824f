// sub: Y = A - B (broadcasting);  dA = sum_to(dY, A.shape),  dB = -sum_to(dY, B.shape);
//   tY = tA - tB (broadcast to Y.shape)

#include <tapegrad/ops/sub.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor sub(const Tensor& A, const Tensor& B, const std::source_location& where) {
  detail::check_floating("sub", A);
  Tensor Y = dispatch(A.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("sub", A, B, [](auto x, auto y) { return x - y; });
  });
  return record("sub", std::move(Y), {A, B}, where)
      .formula([sA = A.shape(), sB = B.shape()](const Tensor& dY) -> Grads {
        return {sum_to(dY, sA), scale(sum_to(dY, sB), -1.0)};
      })
      .jvp([](const Tangents& t, const Tensor& Y) {
        const Tensor minus_tB =
            detail::tangent_term(t[1], [](const Tensor& tB) { return scale(tB, -1.0); });
        return detail::tangent_sum(t[0], minus_tB, Y.shape());
      });
}

}  // namespace tg
