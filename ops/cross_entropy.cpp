// cross_entropy: y = -(1/M) sum_{n: t_n != ignore} (X[n, t_n] - lse_n),  lse_n = log sum_v e^X[n,v]
//   (M targets not ignored);  dX = dy (w softmax(X) - w onehot(t)),  w_n = [t_n != ignore] / M
// M = 0 gives y = NaN (0 / 0, as PyTorch) and dX = 0 (no target picks an entry, as PyTorch).

#include <tapegrad/ops/cross_entropy.h>

#include <cmath>
#include <limits>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/softmax.h>
#include <tapegrad/ops/sub.h>

namespace tg {

namespace {

void check_inputs(const Tensor& X, const Tensor& t, int64_t ignore_index) {
  detail::check_defined("cross_entropy", X, "logits");
  detail::check_defined("cross_entropy", t, "targets");
  const std::string shapes = "logits " + X.shape().str() + ", targets " + t.shape().str();
  if (!is_floating(X.dtype()))
    throw ValueError("cross_entropy: logits must be float32 or float64, got int64: " + shapes);
  if (t.dtype() != Dtype::i64)
    throw ValueError("cross_entropy: targets must be int64, got " +
                     std::string(dtype_name(t.dtype())) + ": " + shapes);
  if (X.rank() != 2 || t.rank() != 1)
    throw ShapeError("cross_entropy: needs logits (N, V) and targets (N,), got " + shapes);
  if (X.size(0) != t.size(0))
    throw ShapeError("cross_entropy: N differs: " + shapes);
  const int64_t V = X.size(1);
  const int64_t* pt = t.data<int64_t>();
  for (int64_t n = 0; n < t.numel(); ++n)
    if (pt[n] != ignore_index && (pt[n] < 0 || pt[n] >= V))
      throw ValueError("cross_entropy: target " + std::to_string(pt[n]) + " at position " +
                       std::to_string(n) + " is outside [0, " + std::to_string(V) +
                       ") and is not ignore_index " + std::to_string(ignore_index) + ": " + shapes);
}

// The formula's constants, in X's dtype: w (N, 1) and w * onehot(t) (N, V).
struct Weights {
  Tensor w, w_onehot;
};

Weights weights_of(const Tensor& t, int64_t ignore_index, int64_t M, const Shape& sX, Dtype d) {
  const int64_t N = sX[0], V = sX[1];
  Weights r{zeros({N, 1}, d), zeros(sX, d)};
  dispatch(d, [&]<class T>() {
    const int64_t* pt = t.data<int64_t>();
    T* w = r.w.data<T>();
    T* wo = r.w_onehot.data<T>();
    for (int64_t n = 0; n < N; ++n) {
      if (pt[n] == ignore_index) continue;
      w[n] = T(1) / T(M);
      wo[n * V + pt[n]] = w[n];
    }
  });
  return r;
}

}  // namespace

Tensor cross_entropy(const Tensor& X, const Tensor& targets, int64_t ignore_index,
                     const std::source_location& where) {
  check_inputs(X, targets, ignore_index);
  const int64_t N = X.size(0), V = X.size(1);
  const int64_t* pt = targets.data<int64_t>();
  int64_t M = 0;
  for (int64_t n = 0; n < N; ++n) M += pt[n] != ignore_index;
  Tensor y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    double total = 0;  // in double, so float32 loses nothing over long batches
    for (int64_t n = 0; n < N; ++n) {
      if (pt[n] == ignore_index) continue;  // a target that counts implies V >= 1
      const auto x = detail::CMapArr<T>(X.data<T>() + n * V, V);
      const T mx = x.maxCoeff();
      const T lse = mx + std::log((x - mx).exp().sum());
      total += double(x[pt[n]]) - double(lse);
    }
    y.data<T>()[0] = T(-total / double(M));  // M = 0: NaN
  });
  return record("cross_entropy", std::move(y), {X}, where)
      .saves(X, targets)
      .formula([X, targets, ignore_index, M](const Tensor& dy) -> Grads {
        const Weights c = weights_of(targets, ignore_index, M, X.shape(), X.dtype());
        return {mul(sub(mul(softmax(X), c.w), c.w_onehot), dy)};  // dy is rank 0 and broadcasts
      })
      .kernel([X, targets, ignore_index, M](const Tensor& dy) -> Grads {
        // The same products, fused into one pass per row (softmax computed as the softmax op does).
        const int64_t N = X.size(0), V = X.size(1);
        Tensor dX = zeros(X.shape(), X.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          const int64_t* t = targets.data<int64_t>();
          const T* px = X.data<T>();
          T* dx = dX.data<T>();
          const T g = dy.data<T>()[0], w = T(1) / T(M), ninf = -std::numeric_limits<T>::infinity();
          for (int64_t n = 0; n < N; ++n) {
            if (t[n] == ignore_index) continue;
            const auto x = detail::CMapArr<T>(px + n * V, V);
            auto row = detail::MapArr<T>(dx + n * V, V);
            const T mx = x.maxCoeff();
            row = (x == ninf).select(T(0), (x - mx).exp());
            row /= row.sum();
            row *= w;
            row[t[n]] -= w;
            row *= g;
          }
        });
        return {dX};
      });
}

}  // namespace tg
