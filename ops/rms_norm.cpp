// rms_norm over the last axis (C): r = 1 / sqrt(mean(X^2) + eps),  Xhat = X r,  Y = Xhat W;
//   g = dY W:  dX = r (g - Xhat mean(g Xhat)),  dW = sum_rows(dY Xhat);
//   tY = tXhat W + Xhat tW,  tXhat = r (tX - Xhat mean(tX Xhat))   (the Jacobian is symmetric)
// (d r / d X = -r^3 X / C, so the mean(g X) r^3 X term is Xhat mean(g Xhat) r.) The forward and
// the kernel run row by row in the input's dtype; the formula recomputes r with ops.

#include <tapegrad/ops/rms_norm.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mean.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

namespace {

void check_inputs(const Tensor& X, const Tensor& W, double eps) {
  detail::check_floating("rms_norm", X);
  detail::check_min_rank("rms_norm", X, 1);
  if (W.defined()) {
    if (W.dtype() != X.dtype())
      throw ValueError("rms_norm: weight " + W.shape().str() + " " + dtype_name(W.dtype()) +
                       " and input " + X.shape().str() + " " + dtype_name(X.dtype()) +
                       ": dtypes differ");
    if (!(W.shape() == Shape{X.size(-1)}))
      throw ShapeError("rms_norm: weight " + W.shape().str() + " must be (C,) = (" +
                       std::to_string(X.size(-1)) + ",) for input " + X.shape().str());
  }
  if (!(eps >= 0))
    throw ValueError("rms_norm: eps must be >= 0, got " + std::to_string(eps) + " for input " +
                     X.shape().str());
}

// The formula, in ops.
Grads rms_norm_formula(const Tensor& X, const Tensor& W, double eps, const Tensor& dY) {
  const Tensor r = rsqrt(add(mean(mul(X, X), -1, true), eps));  // (..., 1)
  const Tensor Xhat = mul(X, r);                                // (..., C)
  const Tensor g = W.defined() ? mul(dY, W) : dY;               // (..., C)
  Tensor dX, dW;
  if (X.requires_grad()) dX = mul(r, sub(g, mul(Xhat, mean(mul(g, Xhat), -1, true))));
  if (W.defined() && W.requires_grad()) dW = sum_to(mul(dY, Xhat), W.shape());
  return {dX, dW};
}

// The tangent rule, in ops.
Tensor rms_norm_jvp(const Tensor& X, const Tensor& W, double eps, const Tangents& t) {
  const Tensor r = rsqrt(add(mean(mul(X, X), -1, true), eps));  // (..., 1)
  const Tensor Xhat = mul(X, r);                                // (..., C)
  const Tensor from_x = detail::tangent_term(t[0], [&](const Tensor& tX) {
    const Tensor tXhat = mul(r, sub(tX, mul(Xhat, mean(mul(tX, Xhat), -1, true))));
    return W.defined() ? mul(tXhat, W) : tXhat;
  });
  const Tensor from_w =
      detail::tangent_term(t[1], [&](const Tensor& tW) { return mul(Xhat, tW); });
  return detail::tangent_sum(from_x, from_w, X.shape());
}

// The same gradients, row by row, from the forward's r (rstd: one per row).
template <class T>
Grads rms_norm_kernel(const Tensor& X, const Tensor& W, const Tensor& rstd, const Tensor& dY) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  const int64_t C = X.size(-1), rows = C ? X.numel() / C : 0;
  const bool need_x = X.requires_grad(), need_w = W.defined() && W.requires_grad();
  Tensor dX = need_x ? Tensor(X.shape(), X.dtype()) : Tensor();
  const Arr w = W.defined() ? Arr(detail::CMapArr<T>(W.data<T>(), C)) : Arr::Ones(C);
  Arr dw = Arr::Zero(C), xhat(C), g(C);
  for (int64_t i = 0; i < rows; ++i) {
    const T r = rstd.data<T>()[i];
    xhat = detail::CMapArr<T>(X.data<T>() + i * C, C) * r;
    const auto dy = detail::CMapArr<T>(dY.data<T>() + i * C, C);
    if (need_x) {
      g = dy * w;
      detail::MapArr<T>(dX.data<T>() + i * C, C) = r * (g - xhat * (g * xhat).mean());
    }
    if (need_w) dw += dy * xhat;
  }
  Tensor dW;
  if (need_w) {
    dW = Tensor(W.shape(), W.dtype());
    detail::MapArr<T>(dW.data<T>(), C) = dw;
  }
  return {dX, dW};
}

}  // namespace

Tensor rms_norm(const Tensor& X, const Tensor& W, double eps, const std::source_location& where) {
  check_inputs(X, W, eps);
  const int64_t C = X.size(-1), rows = C ? X.numel() / C : 0;
  Tensor Y(X.shape(), X.dtype());
  Tensor rstd(Shape{rows}, X.dtype());  // per row: 1 / sqrt(mean(X^2) + eps)
  dispatch(X.dtype(), [&]<class T>() {
    for (int64_t i = 0; i < rows; ++i) {
      const auto x = detail::CMapArr<T>(X.data<T>() + i * C, C);
      const T r = T(1) / std::sqrt(x.square().mean() + T(eps));
      rstd.data<T>()[i] = r;
      auto y = detail::MapArr<T>(Y.data<T>() + i * C, C);
      if (W.defined())
        y = (x * r) * detail::CMapArr<T>(W.data<T>(), C);
      else
        y = x * r;
    }
  });
  return record("rms_norm", std::move(Y), {X, W}, where)
      .saves(X, W)
      .formula([X, W, eps](const Tensor& dY) -> Grads { return rms_norm_formula(X, W, eps, dY); })
      .kernel([X, W, rstd](const Tensor& dY) -> Grads {
        return dispatch(X.dtype(), [&]<class T>() { return rms_norm_kernel<T>(X, W, rstd, dY); });
      })
      .jvp([&](const Tangents& t) { return rms_norm_jvp(X, W, eps, t); });
}

}  // namespace tg
