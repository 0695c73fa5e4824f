// add: Y = A + B (broadcasting);  dA = sum_to(dY, A.shape),  dB = sum_to(dY, B.shape);
//   tY = tA + tB (broadcast to Y.shape)

#include <tapegrad/ops/add.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

Tensor add(const Tensor& A, const Tensor& B, const std::source_location& where) {
  detail::check_floating("add", A);
  Tensor Y = dispatch(A.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("add", A, B, [](auto x, auto y) { return x + y; });
  });
  return record("add", std::move(Y), {A, B}, where)
      .formula([sA = A.shape(), sB = B.shape()](const Tensor& dY) -> Grads {
        return {sum_to(dY, sA), sum_to(dY, sB)};
      })
      .jvp([](const Tangents& t, const Tensor& Y) {
        return detail::tangent_sum(t[0], t[1], Y.shape());
      });
}

}  // namespace tg
