#pragma once
// Tensor hooks, as PyTorch's Tensor.register_hook: a function that sees the gradient flowing into
// a tensor during a backward (or tg::grad) and may replace it by returning another of the same
// shape and dtype (an undefined result keeps it). A non-leaf's hooks run on its summed gradient
// before its op's backward uses it; a leaf's on its pass's summed gradient before it joins
// .grad() (or is returned by tg::grad). Hooks run in the order they were registered, in grad
// mode under create_graph; a hook may not run a backward (GraphError).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tg {

class Tensor;
using GradHook = std::function<Tensor(const Tensor& grad)>;

namespace detail {
struct HookList {
  std::vector<std::pair<uint64_t, GradHook>> hooks;
  uint64_t next_id = 0;
};
/// g after every hook of `list`; `what` names the tensor for the error a hook of the wrong
/// shape or dtype gets (GraphError).
Tensor run_hooks(const HookList& list, Tensor g, const std::string& what);
}  // namespace detail

/// What register_hook returns: remove() takes the hook away (a no-op once the tensor is gone).
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<detail::HookList> list, uint64_t id) : list_(std::move(list)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<detail::HookList> list_;
  uint64_t id_ = 0;
};

}  // namespace tg
