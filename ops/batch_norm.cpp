// batch_norm over every axis but 1 (the channels C; M = numel / C values each):
//   training: mu = mean(X), var = mean((X - mu)^2);  evaluation: mu, var = the running stats;
//   r = 1 / sqrt(var + eps),  Xhat = (X - mu) r,  Y = Xhat W + B;
//   g = dY W:  training  dX = r (g - mean(g) - Xhat mean(g Xhat))   (the stats depend on X)
//              evaluation dX = r g                                 (they are constants)
//   dW = sum(dY Xhat),  dB = sum(dY)   (over every axis but 1)
//   tY = tXhat W + Xhat tW + tB,  training   tXhat = r (tX - mean(tX) - Xhat mean(tX Xhat))
//                                 evaluation tXhat = r tX
//   (Xhat's Jacobian is symmetric: tXhat is dX's map applied to tX)
//   running stats (training): r_mean = (1 - m) r_mean + m mu,
//                             r_var = (1 - m) r_var + m var M / (M - 1)   (unbiased, as PyTorch)
// The forward runs channel by channel in double; the formula recomputes Xhat with ops.

#include <tapegrad/ops/batch_norm.h>

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

void check_inputs(const Tensor& X, const Tensor& rm, const Tensor& rv, const Tensor& W,
                  const Tensor& B, bool training, double momentum, double eps) {
  detail::check_floating("batch_norm", X);
  detail::check_min_rank("batch_norm", X, 2);
  detail::check_per_channel("batch_norm", X, W, "weight");
  detail::check_per_channel("batch_norm", X, B, "bias");
  detail::check_per_channel("batch_norm", X, rm, "running_mean");
  detail::check_per_channel("batch_norm", X, rv, "running_var");
  if (rm.defined() != rv.defined())
    throw ValueError("batch_norm: running_mean and running_var must both be given or both be "
                     "undefined, for input " + X.shape().str());
  if ((rm.defined() && rm.requires_grad()) || (rv.defined() && rv.requires_grad()))
    throw ValueError("batch_norm: the running statistics must not require grad, for input " +
                     X.shape().str());
  if (!training && !rm.defined())
    throw ValueError("batch_norm: evaluation needs running_mean and running_var, for input " +
                     X.shape().str());
  if (training && (X.size(1) ? X.numel() / X.size(1) : 0) <= 1)
    throw ValueError("batch_norm: expected more than 1 value per channel when training, got "
                     "input " + X.shape().str());
  if (!(eps >= 0))
    throw ValueError("batch_norm: eps must be >= 0, got " + std::to_string(eps) + " for input " +
                     X.shape().str());
  if (!std::isfinite(momentum))
    throw ValueError("batch_norm: momentum must be finite, got " + std::to_string(momentum) +
                     " for input " + X.shape().str());
}

// Every axis but 1: {0, 2, 3, ...}.
std::vector<int> reduced_axes(int rank) {
  std::vector<int> dims{0};
  for (int a = 2; a < rank; ++a) dims.push_back(a);
  return dims;
}

// (C,) as (1, C, 1, ...), to broadcast against X.
Tensor per_channel(const Tensor& p, int rank) {
  std::vector<int64_t> s(rank, 1);
  s[1] = p.size(0);
  return reshape(p, s);
}

// The formula, in ops. In evaluation `mu` and `r` are the running stats' constants (1, C, 1..).
Grads batch_norm_formula(const Tensor& X, const Tensor& W, const Tensor& B, const Tensor& mu,
                         const Tensor& r, double eps, const Tensor& dY) {
  const std::vector<int> dims = reduced_axes(X.rank());
  const Tensor g = W.defined() ? mul(dY, per_channel(W, X.rank())) : dY;  // (N, C, ...)
  Tensor Xhat, dX, dW, dB;
  if (mu.defined()) {  // evaluation
    Xhat = mul(sub(X, mu), r);
    if (X.requires_grad()) dX = mul(g, r);
  } else {
    const detail::Normalized n = detail::normalize_over(X, dims, eps);
    Xhat = n.Xhat;
    if (X.requires_grad()) dX = detail::normalize_over_backward(n, g, dims);
  }
  if (W.defined() && W.requires_grad()) dW = sum(mul(dY, Xhat), dims);  // (C,)
  if (B.defined() && B.requires_grad()) dB = sum(dY, dims);             // (C,)
  return {dX, dW, dB};
}

// The tangent rule, in ops; `mu` and `r` as in the formula.
Tensor batch_norm_jvp(const Tensor& X, const Tensor& W, const Tensor& mu, const Tensor& r,
                      double eps, const Tangents& t) {
  const std::vector<int> dims = reduced_axes(X.rank());
  const detail::Normalized n = mu.defined() ? detail::Normalized{mul(sub(X, mu), r), r}
                                            : detail::normalize_over(X, dims, eps);
  const Tensor from_x = detail::tangent_term(t[0], [&](const Tensor& tX) {
    const Tensor tXhat = mu.defined() ? mul(tX, r) : detail::normalize_over_backward(n, tX, dims);
    return W.defined() ? mul(tXhat, per_channel(W, X.rank())) : tXhat;  // (N, C, ...)
  });
  const Tensor from_w = detail::tangent_term(
      t[1], [&](const Tensor& tW) { return mul(n.Xhat, per_channel(tW, X.rank())); });
  const Tensor from_b = detail::tangent_term(
      t[2], [&](const Tensor& tB) { return per_channel(tB, X.rank()); });
  return detail::tangent_sum(detail::tangent_sum(from_x, from_w, X.shape()), from_b, X.shape());
}

// Per channel mean and 1 / sqrt(var + eps) of the batch (training: also the running stats'
// update) or of the running stats (evaluation), then Y.
template <class T>
void batch_norm_forward(const Tensor& X, Tensor rm, Tensor rv, const Tensor& W, const Tensor& B,
                        bool training, double momentum, double eps, Tensor& Y,
                        std::vector<double>& mu, std::vector<double>& rstd) {
  const int64_t N = X.size(0), C = X.size(1), S = N * C != 0 ? X.numel() / (N * C) : 0, M = N * S;
  const T* x = X.data<T>();
  T* y = Y.data<T>();
  for (int64_t c = 0; c < C; ++c) {
    double m, var;
    if (training) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) s += detail::CMapArr<T>(x + (n * C + c) * S, S).template cast<double>().sum();
      m = s / static_cast<double>(M);
      double ss = 0;
      for (int64_t n = 0; n < N; ++n)
        ss += (detail::CMapArr<T>(x + (n * C + c) * S, S).template cast<double>() - m).square().sum();
      var = ss / static_cast<double>(M);
    } else {
      m = static_cast<double>(rm.data<T>()[c]);
      var = static_cast<double>(rv.data<T>()[c]);
    }
    mu[c] = m;
    rstd[c] = 1.0 / std::sqrt(var + eps);
    const double w = W.defined() ? static_cast<double>(W.data<T>()[c]) : 1.0;
    const double b = B.defined() ? static_cast<double>(B.data<T>()[c]) : 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (n * C + c) * S;
      detail::MapArr<T>(y + at, S) =
          ((detail::CMapArr<T>(x + at, S).template cast<double>() - m) * (rstd[c] * w) + b)
              .template cast<T>();
    }
    if (training && rm.defined()) {
      T* rmean = rm.data<T>();
      T* rvar = rv.data<T>();
      const double unbiased = var * static_cast<double>(M) / static_cast<double>(M - 1);
      rmean[c] = static_cast<T>((1 - momentum) * static_cast<double>(rmean[c]) + momentum * m);
      rvar[c] = static_cast<T>((1 - momentum) * static_cast<double>(rvar[c]) + momentum * unbiased);
    }
  }
}

}  // namespace

Tensor batch_norm(const Tensor& X, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& W, const Tensor& B, bool training, double momentum, double eps,
                  const std::source_location& where) {
  check_inputs(X, running_mean, running_var, W, B, training, momentum, eps);
  const int64_t C = X.size(1);
  Tensor Y(X.shape(), X.dtype());
  std::vector<double> mu(C), rstd(C);
  dispatch(X.dtype(), [&]<class T>() {
    batch_norm_forward<T>(X, running_mean, running_var, W, B, training, momentum, eps, Y, mu, rstd);
  });
  // Evaluation's stats are constants of this call: copied, so a later training step's update of
  // the running stats does not change what this backward computes.
  Tensor mu_c, r_c;
  if (!training) {
    std::vector<int64_t> s(X.rank(), 1);
    s[1] = C;
    mu_c = from_vector(mu, Shape(s), X.dtype());
    r_c = from_vector(rstd, Shape(s), X.dtype());
  }
  return record("batch_norm", std::move(Y), {X, W, B}, where)
      .saves(X, W)
      .formula([X, W, B, mu_c, r_c, eps](const Tensor& dY) -> Grads {
        return batch_norm_formula(X, W, B, mu_c, r_c, eps, dY);
      })
      .jvp([&](const Tangents& t) {
        return batch_norm_jvp(X, W, mu_c, r_c, eps, t);
      });
}

}  // namespace tg
