// Summing gradients, and committing a pass's staged leaf gradients into .grad(): one kernel, which
// writes in place only into a buffer nobody else sees (PyTorch's rule for .grad()).

#include <cstdint>
#include <mutex>

#include <tapegrad/autograd/engine.h>

namespace tg::detail {

namespace {

// Guards a leaf's .grad() while a pass commits into it; leaves hash to one of 64 locks.
std::mutex& leaf_lock(const TensorImpl* leaf) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<std::uintptr_t>(leaf) >> 6) % 64];
}

// Nobody but the pass holds t or its buffer: not the caller (a grad_output, a view of one), not
// the user (a .grad() handle kept from an earlier pass).
bool only_the_pass_holds(const std::shared_ptr<TensorImpl>& t) {
  return t.use_count() == 1 && t->storage.use_count() == 1;
}

}  // namespace

void add_into(std::shared_ptr<TensorImpl>& slot, const Tensor& g, bool create_graph) {
  // A buffer someone else sees, or a recorded gradient, keeps its values: the sum goes to a new
  // buffer then, recorded under create_graph (its formula passes dY through to both sides).
  // Under forward mode the sum is an op too, so that the gradients' tangents add up.
  const bool forward = forward_level() != 0;
  const bool in_place = !create_graph && !forward && !slot->grad_fn && only_the_pass_holds(slot);
  const Tensor a(slot);
  Tensor sum = in_place ? a : Tensor(a.shape(), a.dtype());
  dispatch(a.dtype(), [&]<class T>() {
    const T* x = a.data<T>();
    const T* y = g.data<T>();
    T* s = sum.data<T>();
    const int64_t n = a.numel();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) s[i] = x[i] + y[i];
  });
  if (in_place) return;
  if (create_graph || forward)
    sum = record("accumulate", sum, {a, g})
              .formula([](const Tensor& dY) -> Grads { return {dY, dY}; })
              .jvp([](const Tangents& t) {
                if (!t[0].defined() || !t[1].defined()) return t[0].defined() ? t[0] : t[1];
                std::shared_ptr<TensorImpl> s = t[0].impl_ptr();  // t[0] + t[1], a new buffer:
                add_into(s, t[1], is_grad_enabled());            // t[0] is held twice here
                return Tensor(s);
              });
  slot = sum.impl_ptr();
}

void commit_leaf_grads(std::span<const LeafState> leaves, bool create_graph) {
  GradModeGuard mode(create_graph);
  for (const LeafState& l : leaves) {
    if (!l.grad || !l.leaf->requires_grad) continue;
    std::lock_guard lock(leaf_lock(l.leaf));  // threads may share a leaf (a model's parameters)
    std::shared_ptr<TensorImpl>& grad = l.leaf->grad;
    if (grad) {
      add_into(grad, Tensor(l.grad), create_graph);
      continue;
    }
    // The staged gradient may share its buffer with a tensor the caller holds (grad_output, or
    // a view of it): then .grad() gets a copy, unless create_graph needs its place on the tape.
    const bool take = only_the_pass_holds(l.grad) || (create_graph && l.grad->grad_fn);
    grad = take ? l.grad : Tensor(l.grad).clone().impl_ptr();
  }
}

}  // namespace tg::detail
