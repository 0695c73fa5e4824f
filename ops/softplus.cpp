// softplus: Y = log1p(exp(beta X)) / beta where beta X <= threshold, else X;
//   dX = dY * sigmoid(beta X) where beta X <= threshold, else dY
// The switch (L = [beta X > threshold]) is a constant of the formula: dX = dY (L + (1 - L) s),
// and of the rule: tY = tX (L + (1 - L) s),  s = sigmoid(beta X).

#include <tapegrad/ops/softplus.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sigmoid.h>

namespace tg {

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
    for (int64_t i = 0; i < X.numel(); ++i) {  // written as PyTorch's CPU kernel, to round alike
      const bool lin = x[i] * b > th;
      l[i] = lin ? T(1) : T(0);
      y[i] = lin ? x[i] : std::log1p(std::exp(x[i] * b)) / b;
    }
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
          for (int64_t i = 0; i < X.numel(); ++i) {  // as PyTorch's CPU kernel
            const T z = std::exp(x[i] * b);
            dx[i] = x[i] * b > th ? dy[i] : dy[i] * z / (z + T(1));
          }
        });
        return {dX};
      })
      .jvp([&](const Tangents& t) {
        return mul(t[0], add(linear, mul(sub(1.0, linear), sigmoid(scale(X, beta)))));
      });
}

}  // namespace tg
