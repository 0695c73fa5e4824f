// nll_loss, the class axis c being axis 1 (axis 0 of a (C,) input), i over the target's
// positions (n, j), j the trailing positions d1 ... flattened, w the class weights (1 without):
//   E_i = -w_{t_i} logp[n, t_i, j] (0 if ignored),  L = E (none), sum_i E_i, or sum_i E_i / W,
//   W = sum_{i kept} w_{t_i} (mean);
//   dlogp = dL' * K,  K[n, c, j] = -w_c [c = t_i] f,  f = 1 / W for the mean (0 if W = 0), else 1,
//   dL' = dL reshaped to (N, 1, d1, ...) for none (it broadcasts over c), dL itself otherwise.
//   tL = sum_c K tlogp (none: the target's shape), or sum(K tlogp) over every axis
// K is a constant and dlogp is linear in dL, so the formula is its own second derivative.

#include <tapegrad/ops/nll_loss.h>

#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum.h>

namespace tg {

namespace {

void check_inputs(const Tensor& X, const Tensor& t, const NllLossOptions& o) {
  detail::check_defined("nll_loss", X, "logp");
  detail::check_defined("nll_loss", t, "target");
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "logp " + X.shape().str() + ", target " + t.shape().str();
  };
  if (!is_floating(X.dtype()))
    throw ValueError("nll_loss: logp must be float32 or float64, got " +
                     std::string(dtype_name(X.dtype())) + ": " + shapes());
  if (t.dtype() != Dtype::i64)
    throw ValueError("nll_loss: target must be int64, got " + std::string(dtype_name(t.dtype())) +
                     ": " + shapes());
  if (X.rank() < 1) throw ShapeError("nll_loss: logp needs a class axis, got " + shapes());
  // The target is logp's shape without axis 1 (without axis 0 for a (C,) logp).
  std::vector<int64_t> want = X.shape().vec();
  want.erase(want.begin() + (X.rank() == 1 ? 0 : 1));
  if (!(t.shape() == Shape(want)))
    throw ShapeError("nll_loss: target must have logp's shape without the class axis (axis " +
                     std::string(X.rank() == 1 ? "0" : "1") + "), so " + Shape(want).str() +
                     ", got " + shapes());
  const int64_t C = X.size(X.rank() == 1 ? 0 : 1);
  if (o.weight.defined()) {
    const auto w = [&] { return ", weight " + o.weight.shape().str(); };
    if (!(o.weight.shape() == Shape{C}))
      throw ShapeError("nll_loss: weight must be (C,) = (" + std::to_string(C) +
                       ",), one per class, got " + shapes() + w());
    if (o.weight.dtype() != X.dtype())
      throw ValueError("nll_loss: weight must have logp's dtype " +
                       std::string(dtype_name(X.dtype())) + ", got " +
                       dtype_name(o.weight.dtype()) + ": " + shapes() + w());
    if (o.weight.requires_grad() || detail::tangent_of(o.weight).defined())
      throw ValueError("nll_loss: weight is a constant here (no gradient or tangent flows to "
                       "it); pass weight.detach(): " + shapes() + w());
  }
  const int64_t* pt = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (pt[i] != o.ignore_index && (pt[i] < 0 || pt[i] >= C))
      throw ValueError("nll_loss: target " + std::to_string(pt[i]) + " at position " +
                       std::to_string(i) + " is outside [0, " + std::to_string(C) +
                       ") and is not ignore_index " + std::to_string(o.ignore_index) + ": " +
                       shapes());
}

}  // namespace

Tensor nll_loss(const Tensor& X, const Tensor& target, const NllLossOptions& o,
                const std::source_location& where) {
  check_inputs(X, target, o);
  const int64_t C = X.size(X.rank() == 1 ? 0 : 1);
  const int64_t N = X.rank() == 1 ? 1 : X.size(0), inner = C && N ? X.numel() / (N * C) : 0;
  const int64_t* pt = target.data<int64_t>();
  Tensor E(target.shape(), X.dtype());
  Tensor K = zeros(X.shape(), X.dtype());  // the derivative's coefficients
  Tensor L = dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    const T* pw = o.weight.defined() ? o.weight.data<T>() : nullptr;
    T* e = E.data<T>();
    T* k = K.data<T>();
    double total = 0, W = 0;  // in double, as cross_entropy
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t i = n * inner + j, c = pt[i];
        if (c == o.ignore_index) {
          e[i] = T(0);
          continue;
        }
        const T w = pw ? pw[c] : T(1);
        const int64_t at = (n * C + c) * inner + j;
        e[i] = -w * x[at];
        k[at] = -w;
        total += double(e[i]);
        W += double(w);
      }
    if (o.reduction == Reduction::none) return E;
    Tensor y(Shape{}, X.dtype());
    y.data<T>()[0] = T(o.reduction == Reduction::sum ? total : total / W);  // W = 0: NaN
    if (o.reduction == Reduction::mean)
      detail::MapArr<T>(k, K.numel()) *= W != 0 ? T(1 / W) : T(0);
    return y;
  });
  std::vector<int64_t> dl_shape;  // dL as it broadcasts over logp: (N, 1, d1, ...) for none
  if (o.reduction == Reduction::none && X.rank() >= 2) {
    dl_shape = X.shape().vec();
    dl_shape[1] = 1;
  }
  return record("nll_loss", std::move(L), {X}, where)
      .formula([K, dl_shape](const Tensor& dL) -> Grads {
        return {mul(dl_shape.empty() ? dL : reshape(dL, dl_shape), K)};
      })
      .jvp([&](const Tangents& t) {
        return dl_shape.empty() ? sum(mul(K, t[0])) : sum(mul(K, t[0]), 1);
      });
}

Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index,
                const std::source_location& where) {
  NllLossOptions o;
  o.ignore_index = ignore_index;
  return nll_loss(logp, target, o, where);
}

}  // namespace tg
