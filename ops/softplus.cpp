// softplus: Y = log1p(exp(beta X)) / beta where beta X <= threshold, else X (and X where
//   exp(beta X) overflows, which is Y to rounding);
//   dX = dY * sigmoid(beta X) where beta X <= threshold, else dY
// The switch (L = [beta X > threshold]) is a constant of the formula: dX = dY (L + (1 - L) s),
// and of the rule: tY = tX (L + (1 - L) s),  s = sigmoid(beta X).

#include <tapegrad/ops/softplus.h>

#include <cmath>
#include <limits>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sigmoid.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

constexpr int64_t kChunk = 1024;  // entries per chunk of the team's passes

}  // namespace

Tensor softplus(const Tensor& X, double beta, double threshold, const std::source_location& where) {
  detail::check_floating("softplus", X);
  if (!(beta != 0 && std::isfinite(beta)))
    throw ValueError("softplus: beta must be finite and nonzero, got " + std::to_string(beta) +
                     " for input " + X.shape().str());
  Tensor Y(X.shape(), X.dtype());
  Tensor linear(X.shape(), X.dtype());  // L: 1 where beta X > threshold
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    T* l = linear.data<T>();
    const T b = T(beta), th = T(threshold);
    // PyTorch's formula, in chunks on the team: exps by detail::exp_into (vectorised; glibc's
    // past Eigen's clamp, so tiny results keep their value), log1p by detail::log1p_into, the
    // switch by bit masks. Past exp's overflow (a threshold beyond 88 in float32, 709 in
    // float64) log1p(exp(beta X)) / beta is X to rounding, and Y takes X there, where PyTorch's
    // kernel gives inf.
    const T inf = std::numeric_limits<T>::infinity();
    detail::for_chunks(X.numel(), kChunk, [&](int64_t i0, int64_t m) {
      T* yc = y + i0;
      alignas(64) T overflow[kChunk];  // 1 where exp(beta X) overflowed
      for (int64_t i = 0; i < m; ++i) yc[i] = x[i0 + i] * b;
      detail::exp_into(yc, yc, m);
      for (int64_t i = 0; i < m; ++i) overflow[i] = detail::pick(yc[i] == inf, T(1), T(0));
      detail::log1p_into(yc, m);
      detail::MapArr<T>(yc, m) /= b;
      for (int64_t i = 0; i < m; ++i) {
        const bool lin = x[i0 + i] * b > th;
        l[i0 + i] = detail::pick(lin, T(1), T(0));
        yc[i] = detail::pick(lin || overflow[i] == T(1), x[i0 + i], yc[i]);
      }
    });
  });
  return record("softplus", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, beta, linear](const Tensor& dY) -> Grads {
        return {mul(dY, add(linear, mul(sub(1.0, linear), sigmoid(scale(X, beta)))))};
      })
      .kernel([X, beta, threshold](const Tensor& dY) -> Grads {
        Tensor dX(X.shape(), X.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          const T* x = X.data<T>();
          const T* dy = dY.data<T>();
          T* dx = dX.data<T>();
          const T b = T(beta), th = T(threshold);
          // dY sigmoid(beta X) as z / (z + 1), z = exp(beta X), divided first: PyTorch's kernel
          // multiplies dY z first, which overflows to inf once z nears the dtype's largest (a
          // threshold past 88 in float32), and z = inf (past it) gives the sigmoid's limit, 1.
          detail::for_chunks(X.numel(), kChunk, [&](int64_t i0, int64_t m) {
            T* z = dx + i0;
            for (int64_t i = 0; i < m; ++i) z[i] = x[i0 + i] * b;
            detail::exp_into(z, z, m);
            for (int64_t i = 0; i < m; ++i) {
              const T g = dy[i0 + i], zi = z[i], inf = std::numeric_limits<T>::infinity();
              const T s = detail::pick(zi == inf, T(1), zi / (zi + T(1)));
              z[i] = detail::pick(x[i0 + i] * b > th, g, g * s);
            }
          });
        });
        return {dX};
      })
      .jvp([&](const Tangents& t) {
        return mul(t[0], add(linear, mul(sub(1.0, linear), sigmoid(scale(X, beta)))));
      });
}

}  // namespace tg
