// group_norm of X (N, C, *) in G groups: Xg = X as (N, G, M) with M = C / G * prod(*);
//   mu = mean(Xg, -1), var = mean((Xg - mu)^2, -1), r = 1 / sqrt(var + eps),
//   Xhat = (Xg - mu) r as (N, C, *),  Y = Xhat W + B  (W, B per channel);
//   g = dY W as (N, G, M):  dX = r (g - mean(g) - Xhat mean(g Xhat))  (means over M),
//   dW = sum(dY Xhat),  dB = sum(dY)   (over every axis but 1);
//   tY = tXhat W + Xhat tW + tB,  tXhat = r (tX - mean(tX) - Xhat mean(tX Xhat))  (over M; the
//   Jacobian of Xhat is symmetric, so tXhat is dX's map applied to tX)
// The forward runs group by group in double; the formula recomputes Xhat with ops.

#include <tapegrad/ops/group_norm.h>

#include <cmath>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/norm_formula.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

namespace {

void check_inputs(const Tensor& X, int64_t G, const Tensor& W, const Tensor& B, double eps) {
  detail::check_floating("group_norm", X);
  detail::check_min_rank("group_norm", X, 2);
  if (G < 1)
    throw ValueError("group_norm: groups must be >= 1, got " + std::to_string(G) + " for input " +
                     X.shape().str());
  if (X.size(1) % G != 0)
    throw ShapeError("group_norm: " + std::to_string(X.size(1)) +
                     " channels are not divisible by " + std::to_string(G) +
                     " groups, for input " + X.shape().str());
  detail::check_per_channel("group_norm", X, W, "weight");
  detail::check_per_channel("group_norm", X, B, "bias");
  if (!(eps >= 0))
    throw ValueError("group_norm: eps must be >= 0, got " + std::to_string(eps) + " for input " +
                     X.shape().str());
}

std::vector<int> all_but_channels(int rank) {
  std::vector<int> dims{0};
  for (int a = 2; a < rank; ++a) dims.push_back(a);
  return dims;
}

// The formula, in ops.
Grads group_norm_formula(const Tensor& X, int64_t G, const Tensor& W, const Tensor& B, double eps,
                         const Tensor& dY) {
  const int64_t N = X.size(0);
  std::vector<int64_t> channel_shape(X.rank(), 1);
  channel_shape[1] = X.size(1);
  const std::vector<int> dims = all_but_channels(X.rank());
  const detail::Normalized n = detail::normalize_over(reshape(X, {N, G, -1}), {-1}, eps);
  const Tensor Xhat = reshape(n.Xhat, X.shape().vec());                       // (N, C, *)
  const Tensor g = W.defined() ? mul(dY, reshape(W, channel_shape)) : dY;     // (N, C, *)
  Tensor dX, dW, dB;
  if (X.requires_grad())
    dX = reshape(detail::normalize_over_backward(n, reshape(g, {N, G, -1}), {-1}),
                 X.shape().vec());
  if (W.defined() && W.requires_grad()) dW = sum(mul(dY, Xhat), dims);  // (C,)
  if (B.defined() && B.requires_grad()) dB = sum(dY, dims);             // (C,)
  return {dX, dW, dB};
}

// The tangent rule, in ops.
Tensor group_norm_jvp(const Tensor& X, int64_t G, const Tensor& W, double eps, const Tangents& t) {
  const int64_t N = X.size(0);
  std::vector<int64_t> channel_shape(X.rank(), 1);
  channel_shape[1] = X.size(1);
  const detail::Normalized n = detail::normalize_over(reshape(X, {N, G, -1}), {-1}, eps);
  const Tensor from_x = detail::tangent_term(t[0], [&](const Tensor& tX) {
    const Tensor tXhat = reshape(detail::normalize_over_backward(n, reshape(tX, {N, G, -1}), {-1}),
                                 X.shape().vec());  // (N, C, *)
    return W.defined() ? mul(tXhat, reshape(W, channel_shape)) : tXhat;
  });
  const Tensor from_w = detail::tangent_term(t[1], [&](const Tensor& tW) {
    return mul(reshape(n.Xhat, X.shape().vec()), reshape(tW, channel_shape));
  });
  const Tensor from_b =
      detail::tangent_term(t[2], [&](const Tensor& tB) { return reshape(tB, channel_shape); });
  return detail::tangent_sum(detail::tangent_sum(from_x, from_w, X.shape()), from_b, X.shape());
}

template <class T>
void group_norm_forward(const Tensor& X, int64_t G, const Tensor& W, const Tensor& B, double eps,
                        Tensor& Y) {
  const int64_t N = X.size(0), C = X.size(1), S = N * C != 0 ? X.numel() / (N * C) : 0, Cg = C / G;
  const T* x = X.data<T>();
  T* y = Y.data<T>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < G; ++k) {
      const int64_t at = (n * C + k * Cg) * S, M = Cg * S;
      const auto xg = detail::CMapArr<T>(x + at, M).template cast<double>();
      const double mu = xg.mean();
      const double rstd = 1.0 / std::sqrt((xg - mu).square().mean() + eps);
      for (int64_t c = k * Cg; c < (k + 1) * Cg; ++c) {
        const double w = W.defined() ? static_cast<double>(W.data<T>()[c]) : 1.0;
        const double b = B.defined() ? static_cast<double>(B.data<T>()[c]) : 0.0;
        const int64_t cat = (n * C + c) * S;
        detail::MapArr<T>(y + cat, S) =
            ((detail::CMapArr<T>(x + cat, S).template cast<double>() - mu) * (rstd * w) + b)
                .template cast<T>();
      }
    }
}

}  // namespace

Tensor group_norm(const Tensor& X, int64_t groups, const Tensor& W, const Tensor& B, double eps,
                  const std::source_location& where) {
  check_inputs(X, groups, W, B, eps);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() { group_norm_forward<T>(X, groups, W, B, eps, Y); });
  return record("group_norm", std::move(Y), {X, W, B}, where)
      .saves(X, W)
      .formula([X, groups, W, B, eps](const Tensor& dY) -> Grads {
        return group_norm_formula(X, groups, W, B, eps, dY);
      })
      .jvp([&](const Tangents& t) { return group_norm_jvp(X, groups, W, eps, t); });
}

}  // namespace tg
