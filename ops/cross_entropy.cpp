// cross_entropy over rows n (the logits' leading axes flattened) with classes c on the last axis,
// lse_n = log sum_c e^X[n,c], class weights w (all 1 without a weight), eps = label_smoothing:
//   y = sum_{n kept} sum_c a[n,c] (lse_n - X[n,c]) / W,   W = sum_{n kept} w_{t_n},
//   a[n,c] = (1 - eps) w_{t_n} [c = t_n] + (eps / V) w_c
//   dX = dy (softmax(X) s - C),  C = a / W on kept rows (0 on ignored ones),  s_n = sum_c C[n,c];
//   ty = sum((softmax(X) s - C) tX)   (ignored rows add 0)
// W = 0 (every target ignored) gives y = NaN (0 / 0, as PyTorch) and dX = 0.

#include <tapegrad/ops/cross_entropy.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/softmax.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

void check_inputs(const Tensor& X, const Tensor& t, const CrossEntropyOptions& o) {
  detail::check_defined("cross_entropy", X, "logits");
  detail::check_defined("cross_entropy", t, "targets");
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "logits " + X.shape().str() + ", targets " + t.shape().str();
  };
  if (!is_floating(X.dtype()))
    throw ValueError("cross_entropy: logits must be float32 or float64, got int64: " + shapes());
  if (t.dtype() != Dtype::i64)
    throw ValueError("cross_entropy: targets must be int64, got " +
                     std::string(dtype_name(t.dtype())) + ": " + shapes());
  if (X.rank() < 1)
    throw ShapeError("cross_entropy: logits need a class axis (the last), got " + shapes());
  if (t.rank() != X.rank() - 1)
    throw ShapeError("cross_entropy: targets must have the logits' shape without the class axis "
                     "(the last), so rank " + std::to_string(X.rank() - 1) + ", got rank " +
                     std::to_string(t.rank()) + ": " + shapes());
  for (int a = 0; a < t.rank(); ++a)
    if (t.size(a) != X.size(a))
      throw ShapeError("cross_entropy: targets must have the logits' shape without the class "
                       "axis (the last); axis " + std::to_string(a) + " differs, " +
                       std::to_string(X.size(a)) + " in the logits and " +
                       std::to_string(t.size(a)) + " in the targets: " + shapes());
  const int64_t V = X.size(-1);
  if (o.weight.defined()) {
    const auto w = [&] { return ", weight " + o.weight.shape().str(); };
    if (o.weight.rank() != 1 || o.weight.size(0) != V)
      throw ShapeError("cross_entropy: weight must be (V,) = (" + std::to_string(V) +
                       ",), one per class, got " + shapes() + w());
    if (o.weight.dtype() != X.dtype())
      throw ValueError("cross_entropy: weight must have the logits' dtype " +
                       std::string(dtype_name(X.dtype())) + ", got " +
                       dtype_name(o.weight.dtype()) + ": " + shapes() + w());
    if (o.weight.requires_grad() || detail::tangent_of(o.weight).defined())
      throw ValueError("cross_entropy: weight is a constant here (no gradient or tangent flows "
                       "to it); pass weight.detach(): " + shapes() + w());
  }
  if (!(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0))
    throw ValueError("cross_entropy: label_smoothing must be in [0, 1], got " +
                     std::to_string(o.label_smoothing) + ": " + shapes());
  const int64_t* pt = t.data<int64_t>();
  for (int64_t n = 0; n < t.numel(); ++n)
    if (pt[n] != o.ignore_index && (pt[n] < 0 || pt[n] >= V))
      throw ValueError("cross_entropy: target " + std::to_string(pt[n]) + " at position " +
                       std::to_string(n) + " is outside [0, " + std::to_string(V) +
                       ") and is not ignore_index " + std::to_string(o.ignore_index) + ": " +
                       shapes());
}

// The derivative's constants (C = a / W and s above), per row and per class, in double.
struct Coefficients {
  int64_t N = 0, V = 0;
  std::vector<int64_t> target;  // (N): t_n, or -1 for an ignored row
  std::vector<double> at_target;  // (N): (1 - eps) w_{t_n} / W
  std::vector<double> smooth;     // (V): (eps / V) w_c / W, for every kept row; empty if eps = 0
  std::vector<double> row_sum;    // (N): s_n
};

// The loss and the coefficients of its derivative.
template <class T>
double loss_and_coefficients(const Tensor& X, const Tensor& t, const CrossEntropyOptions& o,
                             Coefficients& c) {
  const int64_t V = X.size(-1), N = t.numel();
  const int64_t* pt = t.data<int64_t>();
  const T* px = X.data<T>();
  const T* pw = o.weight.defined() ? o.weight.data<T>() : nullptr;
  const double eps = o.label_smoothing;
  auto w = [&](int64_t k) { return pw ? double(pw[k]) : 1.0; };
  double w_sum = 0;  // sum_c w_c, for the smoothing term
  for (int64_t k = 0; k < V; ++k) w_sum += w(k);
  // Each kept row's log-sum-exp, rows shared by the team; then the sums below, in row order.
  std::vector<double> lses(static_cast<std::size_t>(N));
  detail::for_parts(
      N,
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          if (pt[n] == o.ignore_index) continue;  // a target that counts implies V >= 1
          const T mx = detail::CMapArr<T>(px + n * V, V).maxCoeff();
          // (the exps as the backward's exp_into takes them, summed without a store)
          lses[n] = double(mx) + std::log(double(detail::exp_sum_below(px + n * V, mx, V)));
        }
      },
      detail::pass_serial_below(V));
  double total = 0, W = 0;  // in double, so float32 loses nothing over long batches
  for (int64_t n = 0; n < N; ++n) {
    if (pt[n] == o.ignore_index) continue;
    const auto x = detail::CMapArr<T>(px + n * V, V);
    const double lse = lses[n];
    W += w(pt[n]);
    total += (1 - eps) * w(pt[n]) * (lse - double(x[pt[n]]));
    if (eps > 0) {
      double s = 0;
      for (int64_t k = 0; k < V; ++k) s += w(k) * (lse - double(x[k]));
      total += eps / double(V) * s;
    }
  }
  c.N = N;
  c.V = V;
  c.target.assign(N, -1);
  c.at_target.assign(N, 0.0);
  c.row_sum.assign(N, 0.0);
  if (W != 0) {
    for (int64_t n = 0; n < N; ++n) {
      if (pt[n] == o.ignore_index) continue;
      c.target[n] = pt[n];
      c.at_target[n] = (1 - eps) * w(pt[n]) / W;
      c.row_sum[n] = c.at_target[n] + eps * w_sum / (double(V) * W);
    }
    if (eps > 0) {
      c.smooth.resize(V);
      for (int64_t k = 0; k < V; ++k) c.smooth[k] = eps / double(V) * w(k) / W;
    }
  }
  // W = 0: NaN, as PyTorch's (0 / 0 in its nll part), also when smoothing makes total nonzero.
  return W == 0 ? std::numeric_limits<double>::quiet_NaN() : total / W;
}

// The formula's constants as tensors in X's dtype: C (X's shape) and s (X's shape, last axis 1).
std::pair<Tensor, Tensor> coefficient_tensors(const Coefficients& c, const Shape& sX, Dtype d) {
  std::vector<int64_t> row_shape = sX.vec();
  row_shape.back() = 1;
  Tensor C = zeros(sX, d), s = zeros(Shape(row_shape), d);
  dispatch(d, [&]<class T>() {
    T* pc = C.data<T>();
    T* ps = s.data<T>();
    for (int64_t n = 0; n < c.N; ++n) {
      if (c.target[n] < 0) continue;
      for (std::size_t k = 0; k < c.smooth.size(); ++k) pc[n * c.V + k] = T(c.smooth[k]);
      pc[n * c.V + c.target[n]] += T(c.at_target[n]);
      ps[n] = T(c.row_sum[n]);
    }
  });
  return {C, s};
}

// dy/dX = softmax(X) s - C, in ops.
Tensor loss_slope(const Tensor& X, const Coefficients& c) {
  const auto [C, s] = coefficient_tensors(c, X.shape(), X.dtype());
  return sub(mul(softmax(X), s), C);
}

}  // namespace

Tensor cross_entropy(const Tensor& X, const Tensor& targets, const CrossEntropyOptions& options,
                     const std::source_location& where) {
  check_inputs(X, targets, options);
  auto c = std::make_shared<Coefficients>();
  Tensor y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    y.data<T>()[0] = T(loss_and_coefficients<T>(X, targets, options, *c));
  });
  return record("cross_entropy", std::move(y), {X}, where)
      .saves(X)
      .formula([X, c](const Tensor& dy) -> Grads {
        return {mul(loss_slope(X, *c), dy)};  // dy is rank 0 and broadcasts
      })
      .kernel([X, c](const Tensor& dy) -> Grads {
        // The same products, fused into one pass per row (softmax computed as the softmax op
        // does), rows shared by the team; an ignored row is 0.
        Tensor dX(X.shape(), X.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          const T* px = X.data<T>();
          T* dx = dX.data<T>();
          const T g = dy.data<T>()[0];
          const int64_t V = c->V;
          detail::for_parts(
              c->N,
              [&](int64_t begin, int64_t end) {
                for (int64_t n = begin; n < end; ++n) {
                  auto row = detail::MapArr<T>(dx + n * V, V);
                  if (c->target[n] < 0) {
                    row.setZero();
                    continue;
                  }
                  const auto x = detail::CMapArr<T>(px + n * V, V);
                  const T mx = x.maxCoeff();
                  // exp_into is vectorised and makes exp(-inf) exactly 0 (an Eigen select
                  // around the exp went entry by entry through glibc's exp)
                  row = x - mx;
                  detail::exp_into(row.data(), row.data(), V);
                  row *= T(c->row_sum[n]) / detail::row_sum(row.data(), V);
                  for (std::size_t k = 0; k < c->smooth.size(); ++k) row[k] -= T(c->smooth[k]);
                  row[c->target[n]] -= T(c->at_target[n]);
                  row *= g;
                }
              },
              detail::pass_serial_below(V));
        });
        return {dX};
      })
      .jvp([&](const Tangents& t) { return sum(mul(loss_slope(X, *c), t[0])); });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     const std::source_location& where) {
  CrossEntropyOptions o;
  o.ignore_index = ignore_index;
  return cross_entropy(logits, targets, o, where);
}

}  // namespace tg
