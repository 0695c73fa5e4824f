#pragma once
// Module: the base of every layer, after torch.nn.Module. A module registers its parameters
// (tensors it owns, gradients on) and its child modules by name; the names of a tree fall out
// of it, dotted: a GPT's block 0 attention projection is `transformer.h.0.attn.c_attn.weight`.
//
//   class Linear : public Module {
//     Linear(...) { register_parameter("weight", weight); ... }
//     Tensor weight;                       // a member: the module reads it in forward
//   };
//
// A module refers to its parameter members and its children by address, so it is neither
// copyable nor movable; keep it in place (or behind a pointer).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg::nn {

class Module;
/// A forward hook, as torch.nn.Module.register_forward_hook: it runs after each call of the
/// module (its operator()), sees the module, the call's tensor inputs and its outputs (one, or a
/// recurrent layer's output and state: LSTM {output, h, c}), and may replace any of the outputs.
using ForwardHook = std::function<void(const Module& module, const std::vector<Tensor>& inputs,
                                       std::vector<Tensor>& outputs)>;
// A module's forward hooks by id (shared with the handles, weakly).
struct ForwardHookList {
  std::vector<std::pair<uint64_t, ForwardHook>> hooks;
  uint64_t next_id = 0;
};

/// What register_forward_hook returns: remove() takes the hook away (a no-op once the module is
/// gone). Never throws.
class ForwardHookHandle {
 public:
  ForwardHookHandle() = default;
  ForwardHookHandle(std::weak_ptr<ForwardHookList> list, uint64_t id) : list_(std::move(list)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<ForwardHookList> list_;
  uint64_t id_ = 0;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Every parameter of the tree, own ones first, then each child's in registration order, with
  /// dotted names. The tensors themselves (handles), not copies. Never throws.
  NamedTensors named_parameters() const;
  /// The tensors of named_parameters(), in the same order. Never throws.
  std::vector<Tensor> parameters() const;
  /// Every buffer of the tree (state that is not a parameter: BatchNorm's running statistics),
  /// own ones first, then each child's, with dotted names. The tensors themselves. Never throws.
  NamedTensors named_buffers() const;
  /// The number of parameter elements. Never throws.
  int64_t num_parameters() const;
  /// Drops every parameter's accumulated gradient (torch's default, set_to_none=True; see
  /// optim::Optimizer::zero_grad), or with set_to_none = false zeroes it in place. Never throws.
  void zero_grad(bool set_to_none = true);
  /// Training (dropout on) or evaluation mode, for this module and every descendant. Never throws.
  void train(bool on = true);
  /// train(false). Never throws.
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// The parameters and buffers by name (the same tensors, as PyTorch's state_dict shares
  /// storage), in PyTorch's order: a module's own parameters, then its own buffers, then each
  /// child's entries. Never throws.
  NamedTensors state_dict() const;
  /// Copies `state`'s values into the parameters and buffers (under NoGradGuard, bumping their
  /// versions).
  /// Strict: throws ValueError naming the entry when one is missing, unexpected, repeated,
  /// undefined, or of another shape or dtype; then nothing has been copied.
  void load_state_dict(const NamedTensors& state);
  /// Makes the parameter `name` (dotted) this very tensor, shared, not copied (as assigning
  /// `module.weight = p` in PyTorch), e.g. to differentiate through parameters held elsewhere.
  /// Throws ValueError for an unknown name, another shape or dtype.
  void set_parameter(const std::string& name, const Tensor& value);

  /// Runs `hook` after every call of this module, hooks in the order registered (see
  /// ForwardHook). A hook that leaves another number of outputs than it was given makes the
  /// call throw ValueError. Calling forward() directly runs no hook, as in PyTorch. Never throws.
  ForwardHookHandle register_forward_hook(ForwardHook hook);

 protected:
  /// What a call of the module returns: `output` after the forward hooks (itself when there are
  /// none). Throws what a hook throws, ValueError for a hook that changed the output count.
  Tensor hooked(std::vector<Tensor> inputs, Tensor output) const {
    if (!forward_hooks_ || forward_hooks_->hooks.empty()) return output;
    std::vector<Tensor> outputs{std::move(output)};
    run_forward_hooks(inputs, outputs);
    return outputs[0];
  }
  /// The same for a call of several outputs.
  void run_forward_hooks(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const;
  bool has_forward_hooks() const { return forward_hooks_ && !forward_hooks_->hooks.empty(); }

  /// Registers a member tensor as the parameter `name` and turns its gradient on. Throws
  /// ValueError for a repeated or dotted name or an undefined or non-floating tensor.
  void register_parameter(const std::string& name, Tensor& member);
  /// Registers a member module as the child `name`. Throws ValueError for a repeated name.
  void register_module(const std::string& name, Module& child);
  /// Registers a member tensor as the buffer `name`: saved and loaded with the state dict, never
  /// given a gradient, not among parameters(). Any dtype (int64 for a counter). Throws
  /// ValueError for a repeated or dotted name, an undefined tensor or one that requires grad.
  void register_buffer(const std::string& name, Tensor& member);

 private:
  // Every parameter slot of the tree (and, with `buffers`, every buffer slot; without
  // `params`, only those), with its dotted name, in named_parameters() / state_dict() order.
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out,
               bool params = true, bool buffers = false) const;
  void check_new_name(const std::string& name, const char* who) const;

  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Module*>> children_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  bool training_ = true;
  std::shared_ptr<ForwardHookList> forward_hooks_;  // made by the first hook
};

/// Children numbered 0, 1, ... in order, as torch.nn.ModuleList (a GPT's `transformer.h`).
template <class M>
class ModuleList : public Module {
 public:
  /// Appends a child named by its index. Never throws.
  M& append(std::unique_ptr<M> item) {
    register_module(std::to_string(items_.size()), *item);
    items_.push_back(std::move(item));
    return *items_.back();
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return *items_[i]; }
  const M& operator[](size_t i) const { return *items_[i]; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::unique_ptr<M>> items_;
};

}  // namespace tg::nn
