// binary_cross_entropy_with_logits: s = sigmoid(X), l = log s = min(X, 0) - log1p(exp(-|X|))
// (stable), q = 1 + (P - 1) Y (q = 1 without pos_weight P):
//   E = (1 - Y) X - q l,  L = reduce(E),  f = 1 / N for the mean, else 1;
//   dX = dL f ((1 - Y + P Y) s - P Y)   (= dL f (s - Y) without P),
//   dY = dL f (-X - (P - 1) l)          (= -dL f X without P);
//   tL = sum(f (((1 - Y + P Y) s - P Y) tX - (X + (P - 1) l) tY))   (the terms themselves for none)

#include <tapegrad/ops/binary_cross_entropy_with_logits.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/broadcast_to.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sigmoid.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

constexpr const char* kOp = "binary_cross_entropy_with_logits";

void check_inputs(const Tensor& X, const Tensor& Y, const Tensor& P) {
  detail::check_floating(kOp, X);
  detail::check_floating(kOp, Y);
  detail::check_same_dtype(kOp, X, Y);
  detail::check_loss_shapes(kOp, X, Y);
  if (!P.defined()) return;
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "input " + X.shape().str() + ", pos_weight " + P.shape().str();
  };
  if (P.dtype() != X.dtype())
    throw ValueError(std::string(kOp) + ": pos_weight must have the input's dtype " +
                     dtype_name(X.dtype()) + ", got " + dtype_name(P.dtype()) + ": " + shapes());
  bool fits = true;
  try {
    fits = broadcast_shapes(P.shape(), X.shape(), kOp) == X.shape();
  } catch (const ShapeError&) {
    fits = false;
  }
  if (!fits)
    throw ShapeError(std::string(kOp) + ": pos_weight must broadcast to the input's shape: " +
                     shapes());
  if (P.requires_grad() || detail::tangent_of(P).defined())
    throw ValueError(std::string(kOp) + ": pos_weight is a constant here (no gradient or "
                     "tangent flows to it); pass pos_weight.detach(): " + shapes());
}

// dE/dX = (1 - Y + P Y) s - P Y  (= s - Y without P), from s = sigmoid(X).
Tensor slope_x(const Tensor& s, const Tensor& Y, const Tensor& P) {
  if (!P.defined()) return sub(s, Y);
  const Tensor PY = mul(P, Y);
  return sub(mul(add(sub(1.0, Y), PY), s), PY);
}

// -dE/dY = X + (P - 1) l  (= X without P), l = log s.
Tensor minus_slope_y(const Tensor& X, const Tensor& s, const Tensor& P) {
  return P.defined() ? add(X, mul(sub(P, 1.0), log(s))) : X;
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& X, const Tensor& Y,
                                        const BceWithLogitsOptions& o,
                                        const std::source_location& where) {
  const Tensor& P = o.pos_weight;
  check_inputs(X, Y, P);
  Tensor E(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    const T* x = X.data<T>();
    const T* y = Y.data<T>();
    T* e = E.data<T>();
    // log_sigmoid as PyTorch's CPU kernel writes it, vectorised: the exps by detail::exp_into
    // (glibc's past Eigen's clamp), log1p by detail::log1p_into, chunks on the team.
    detail::for_chunks(n, 1024, [&](int64_t i0, int64_t m) {
      T* ec = e + i0;
      for (int64_t i = 0; i < m; ++i) ec[i] = -std::abs(x[i0 + i]);
      detail::exp_into(ec, ec, m);
      detail::log1p_into(ec, m);
      for (int64_t i = 0; i < m; ++i) ec[i] = std::min(x[i0 + i], T(0)) - ec[i];
    });
    if (P.defined()) {  // e *= 1 + (P - 1) Y, P broadcast
      const Tensor Pb = broadcast_to(P, X.shape());
      const T* p = Pb.data<T>();
      for (int64_t i = 0; i < n; ++i) e[i] *= (p[i] - T(1)) * y[i] + T(1);
    }
    for (int64_t i = 0; i < n; ++i) e[i] = (T(1) - y[i]) * x[i] - e[i];
  });
  const double f = detail::reduction_factor(o.reduction, X.numel());
  return record(kOp, detail::reduce_loss(E, o.reduction), {X, Y}, where)
      .saves(X, Y)
      .formula([X, Y, P, f](const Tensor& dL) -> Grads {
        const Tensor s = sigmoid(X);
        Tensor dX, dY;
        if (X.requires_grad()) dX = mul(dL, scale(slope_x(s, Y, P), f));
        if (Y.requires_grad()) dY = mul(dL, scale(minus_slope_y(X, s, P), -f));
        return {dX, dY};
      })
      .jvp([&, reduction = o.reduction](const Tangents& t) {
        const Tensor s = sigmoid(X);
        const Tensor from_x = detail::tangent_term(
            t[0], [&](const Tensor& tX) { return mul(scale(slope_x(s, Y, P), f), tX); });
        const Tensor from_y = detail::tangent_term(
            t[1], [&](const Tensor& tY) { return mul(scale(minus_slope_y(X, s, P), -f), tY); });
        const Tensor tE = detail::tangent_sum(from_x, from_y, X.shape());
        return reduction == Reduction::none ? tE : sum(tE);
      });
}

Tensor binary_cross_entropy_with_logits(const Tensor& X, const Tensor& Y, Reduction reduction,
                                        const std::source_location& where) {
  BceWithLogitsOptions o;
  o.reduction = reduction;
  return binary_cross_entropy_with_logits(X, Y, o, where);
}

}  // namespace tg
