#pragma once
// Shared by the ops' tangent rules (forward mode; not installed). A rule's input tangents may be
// undefined (a zero tangent): these helpers take that in their stride.

#include <initializer_list>

#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/add.h>
#include <tapegrad/ops/broadcast_to.h>

namespace tg::detail {

/// t broadcast to `shape` (an input the op broadcast), or t itself; undefined stays undefined.
inline Tensor tangent_to(const Tensor& t, const Shape& shape) {
  if (!t.defined() || t.shape() == shape) return t;
  return broadcast_to(t, shape);
}

/// a + b broadcast to `shape`, where either may be undefined (zero); undefined when both are.
inline Tensor tangent_sum(const Tensor& a, const Tensor& b, const Shape& shape) {
  if (!a.defined()) return tangent_to(b, shape);
  if (!b.defined()) return tangent_to(a, shape);
  return tangent_to(add(a, b), shape);
}

/// Whether a rule's result will be differentiated in reverse (reverse over forward): grad mode is
/// on and one of `read` (the inputs and tangents the rule reads) requires grad. When not, a rule
/// may compute its tangent by a kernel in one pass, as a backward kernel beside its formula.
inline bool tangent_records(std::initializer_list<Tensor> read) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : read)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

/// X's tangent at the open forward-AD level when the op may compute it with its own output in one
/// kernel: nothing will differentiate the rule (tangent_records), and `constants` (the op's other
/// inputs) carry no tangent. Else undefined, and the op's rule runs as usual.
inline Tensor fused_tangent(const Tensor& X, std::initializer_list<Tensor> constants = {}) {
  if (!forward_level()) return Tensor();
  Tensor tX = tangent_of(X);
  if (!tX.defined() || tangent_records({X, tX})) return Tensor();
  for (const Tensor& c : constants)
    if (tangent_of(c).defined() || tangent_records({c})) return Tensor();
  return tX;
}

/// f(t) where t is defined, else undefined: a term of a rule that one input's tangent makes.
template <class F>
Tensor tangent_term(const Tensor& t, F f) {
  return t.defined() ? f(t) : Tensor();
}

}  // namespace tg::detail
