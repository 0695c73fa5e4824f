// Tensor hooks: registering them (on a leaf's impl, or on a non-leaf's node), running them on a
// gradient, removing them; retain_grad as a hook that keeps the gradient.

#include <tapegrad/autograd/hooks.h>

#include <algorithm>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/grad_mode.h>

namespace tg {

namespace detail {

Tensor run_hooks(const HookList& list, Tensor g, const std::string& what) {
  for (const auto& [id, fn] : list.hooks) {
    Tensor h = fn(g);
    if (!h.defined()) continue;
    if (h.shape() != g.shape() || h.dtype() != g.dtype())
      throw GraphError("a hook on " + what + " returned a gradient of shape " + h.shape().str() +
                       " " + dtype_name(h.dtype()) + " for one of shape " + g.shape().str() + " " +
                       dtype_name(g.dtype()) + "; a hook returns the gradient's shape and dtype");
    g = std::move(h);
  }
  return g;
}

}  // namespace detail

void HookHandle::remove() {
  if (const auto list = list_.lock())
    std::erase_if(list->hooks, [&](const auto& h) { return h.first == id_; });
}

HookHandle Tensor::register_hook(GradHook fn) const {
  if (!requires_grad())
    throw GraphError("register_hook: a tensor of shape " + shape().str() +
                     " that does not require grad has no gradient to hook");
  // A replayed step's nodes are its recorded ones: a hook on one would be added again each call.
  if (!is_leaf() && detail::current_step())
    detail::throw_in_static_step("register_hook (or retain_grad) on a tensor fn made");
  std::shared_ptr<detail::HookList>& list =
      is_leaf() ? impl().hooks : impl().grad_fn->extras().hooks;
  if (!list) list = std::make_shared<detail::HookList>();
  const uint64_t id = list->next_id++;
  list->hooks.emplace_back(id, std::move(fn));
  return HookHandle(list, id);
}

void Tensor::retain_grad() const {
  if (!requires_grad())
    throw GraphError("retain_grad: a tensor of shape " + shape().str() +
                     " that does not require grad has no gradient to keep");
  if (is_leaf()) return;
  // The gradient is kept in this tensor's impl, summed over backwards as a leaf's is.
  std::weak_ptr<TensorImpl> self = impl_ptr();
  register_hook([self](const Tensor& g) -> Tensor {
    if (const auto t = self.lock()) detail::accumulate_grad(t->grad, g, is_grad_enabled());
    return Tensor();
  });
}

}  // namespace tg
