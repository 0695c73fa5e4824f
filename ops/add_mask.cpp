// add_mask: Y = X + M (M constant, broadcast over leading axes), except that Y = -inf exactly
// where M = -inf whatever X holds there (a NaN in a masked score must not leak through the mask);
//   dX = dY * keep,  tY = tX * keep,  keep = (M != -inf): a masked entry does not depend on X

#include <tapegrad/ops/add_mask.h>

#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/mul.h>

namespace tg {

namespace {

// keep: 1 where visible, 0 where masked; undefined when nothing is (keep = 1). A constant of the
// formula and the rule.
Tensor visible(const Tensor& M) {
  return dispatch(M.dtype(), [&]<class T>() {
    Tensor k(M.shape(), M.dtype());
    const T* m = M.data<T>();
    bool masked = false;
    for (int64_t i = 0; i < M.numel(); ++i) {
      k.data<T>()[i] = m[i] == -std::numeric_limits<T>::infinity() ? T(0) : T(1);
      masked = masked || k.data<T>()[i] == T(0);
    }
    return masked ? k : Tensor();
  });
}

// g * keep (X's shape), or g itself when nothing is masked.
Tensor keep_visible(const Tensor& g, const Tensor& keep) {
  return keep.defined() ? mul(g, keep) : g;
}

}  // namespace

Tensor add_mask(const Tensor& X, const Tensor& M, const std::source_location& where) {
  detail::check_same_dtype("add_mask", X, M);
  if (broadcast_shapes(X.shape(), M.shape(), "add_mask") != X.shape())
    throw ShapeError("add_mask: mask " + M.shape().str() + " does not broadcast to input " +
                     X.shape().str());
  if (M.requires_grad() || detail::tangent_of(M).defined())
    throw ValueError("add_mask: the mask " + M.shape().str() +
                     " is a constant and must not require grad or carry a tangent");
  Tensor Y = dispatch(X.dtype(), [&]<class T>() {
    const T* m = M.data<T>();
    for (int64_t i = 0; i < M.numel(); ++i)
      if (std::isnan(m[i]) || m[i] == std::numeric_limits<T>::infinity())
        throw ValueError("add_mask: mask " + M.shape().str() + " holds " +
                         (std::isnan(m[i]) ? "NaN" : "+inf") + " at element " +
                         std::to_string(i) + "; use 0 and -inf");
    const T ninf = -std::numeric_limits<T>::infinity();
    return detail::broadcast_binary<T>("add_mask", X, M, [ninf](auto x, auto m) {
      return (m == ninf).select(m, x + m);
    });
  });
  // Records nothing; under checkpoint's forward, notes that X was read; in forward mode, X's
  // tangent still goes through (keep made only then).
  if (!is_grad_enabled() || !X.requires_grad())
    return record("add_mask", std::move(Y), {X}, where).jvp([&](const Tangents& t) {
      return keep_visible(t[0], visible(M));
    });
  const Tensor keep = visible(M);
  return record("add_mask", std::move(Y), {X}, where)
      .formula([keep](const Tensor& dY) -> Grads { return {keep_visible(dY, keep)}; })
      .jvp([&](const Tangents& t) { return keep_visible(t[0], keep); });
}

Tensor causal_mask(int64_t T, Dtype dtype, int64_t window, int64_t query_offset) {
  if (T < 0) throw ValueError("causal_mask: T must not be negative, got " + std::to_string(T));
  detail::check_causal_mask("causal_mask", window, query_offset);
  const int64_t T_k = query_offset + T;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> m(T * T_k, 0.0);
  for (int64_t i = 0; i < T; ++i) {
    const int64_t pos = query_offset + i;  // row i's position
    for (int64_t j = 0; j < T_k; ++j)
      if (j > pos || (window > 0 && j <= pos - window)) m[i * T_k + j] = -inf;
  }
  return from_vector(m, Shape{T, T_k}, dtype);
}

namespace detail {
void check_causal_mask(const char* op, int64_t window, int64_t query_offset) {
  if (window < 0)
    throw ValueError(std::string(op) + ": window must be at least 1 (0 for none), got " +
                     std::to_string(window));
  if (query_offset < 0)
    throw ValueError(std::string(op) + ": query_offset must not be negative, got " +
                     std::to_string(query_offset));
}
}  // namespace detail

}  // namespace tg
