#pragma once
// What maximum and minimum share (internal, not installed): the derivative of picking A or B
// entry by entry, given `share(first, second)`, the mask of where first's gradient goes (1 where
// it was picked, 1/2 at ties, 0 where the other was). The masks are constants.
//   dA = sum_to(dY * share(A, B), A.shape),  dB = sum_to(dY * share(B, A), B.shape)
//   tY = tA * share(A, B) + tB * share(B, A)  (broadcast to Y.shape)

#include <source_location>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg::detail {

using ShareFn = Tensor (*)(const Tensor& first, const Tensor& second);

inline Tensor record_pick(const char* op, const Tensor& Y, const Tensor& A, const Tensor& B,
                          ShareFn share, const std::source_location& where) {
  return record(op, Y, {A, B}, where)
      .saves(A, B)
      .formula([A, B, share](const Tensor& dY) -> Grads {
        return {A.requires_grad() ? sum_to(mul(dY, share(A, B)), A.shape()) : Tensor(),
                B.requires_grad() ? sum_to(mul(dY, share(B, A)), B.shape()) : Tensor()};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return tangent_sum(tangent_term(t[0], [&](const Tensor& tA) { return mul(tA, share(A, B)); }),
                           tangent_term(t[1], [&](const Tensor& tB) { return mul(tB, share(B, A)); }),
                           Y.shape());
      });
}

}  // namespace tg::detail
