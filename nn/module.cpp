#include <tapegrad/nn/module.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/io/file_util.h>

namespace tg::nn {

void Module::check_new_name(const std::string& name, const char* who) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(std::string(who) + ": name '" + name + "' is empty or has a dot");
  const auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.first == name; });
  };
  if (taken(parameters_) || taken(children_) || taken(buffers_))
    throw ValueError(std::string(who) + ": name '" + name + "' is already registered");
}

ForwardHookHandle Module::register_forward_hook(ForwardHook hook) {
  if (!forward_hooks_) forward_hooks_ = std::make_shared<ForwardHookList>();
  const uint64_t id = forward_hooks_->next_id++;
  forward_hooks_->hooks.emplace_back(id, std::move(hook));
  return ForwardHookHandle(forward_hooks_, id);
}

void ForwardHookHandle::remove() {
  if (const auto list = list_.lock())
    std::erase_if(list->hooks, [&](const auto& h) { return h.first == id_; });
}

void Module::run_forward_hooks(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const {
  if (!forward_hooks_) return;
  const std::vector<std::pair<uint64_t, ForwardHook>> hooks = forward_hooks_->hooks;  // a hook may remove itself
  for (const auto& [id, hook] : hooks) {
    const std::size_t n = outputs.size();
    hook(*this, inputs, outputs);
    if (outputs.size() != n)
      throw ValueError("forward hook " + std::to_string(id) + ": left " + std::to_string(outputs.size()) +
                       " outputs of a call that has " + std::to_string(n) + "; replace them, keep their number");
  }
}

void Module::register_parameter(const std::string& name, Tensor& member) {
  check_new_name(name, "register_parameter");
  if (!member.defined() || !is_floating(member.dtype()))
    throw ValueError("register_parameter: '" + name + "' must be a defined float tensor");
  member.set_requires_grad();
  parameters_.emplace_back(name, &member);
}

void Module::register_module(const std::string& name, Module& child) {
  check_new_name(name, "register_module");
  children_.emplace_back(name, &child);
}

void Module::register_buffer(const std::string& name, Tensor& member) {
  check_new_name(name, "register_buffer");
  if (!member.defined())
    throw ValueError("register_buffer: '" + name + "' must be a defined tensor");
  if (member.requires_grad())
    throw ValueError("register_buffer: '" + name + "' requires grad; a buffer never gets one");
  buffers_.emplace_back(name, &member);
}

// torch.nn.Module._save_to_state_dict's order: own parameters, own buffers, then the children.
void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out,
                     bool params, bool buffers) const {
  if (params)
    for (const auto& [name, slot] : parameters_) out.emplace_back(prefix + name, slot);
  if (buffers)
    for (const auto& [name, slot] : buffers_) out.emplace_back(prefix + name, slot);
  for (const auto& [name, child] : children_)
    child->collect(prefix + name + ".", out, params, buffers);
}

namespace {

// The tensors (handles) of the slots, by name.
NamedTensors handles(const std::vector<std::pair<std::string, Tensor*>>& slots) {
  NamedTensors out;
  out.reserve(slots.size());
  for (const auto& [name, slot] : slots) out.emplace_back(name, *slot);
  return out;
}

}  // namespace

NamedTensors Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots);
  return handles(slots);
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

void Module::zero_grad(bool set_to_none) {
  for (const auto& [name, p] : named_parameters())
    set_to_none ? p.set_grad(Tensor()) : p.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

NamedTensors Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots, false, true);
  return handles(slots);
}

NamedTensors Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots, true, true);
  return handles(slots);
}

namespace {

// "(3, 4) float32"
std::string describe(const Tensor& t) { return t.shape().str() + " " + dtype_name(t.dtype()); }

void check_fits(const char* who, const std::string& name, const Tensor& value,
                const Tensor& param) {
  if (!value.defined()) throw ValueError(std::string(who) + ": entry '" + name + "' is undefined");
  if (value.shape() != param.shape() || value.dtype() != param.dtype())
    throw ValueError(std::string(who) + ": entry '" + name + "' is " + describe(value) +
                     ", the model's entry is " + describe(param));
}

}  // namespace

void Module::load_state_dict(const NamedTensors& state) {
  const NamedTensors params = state_dict();
  std::map<std::string, const Tensor*> given;
  // The names given may come from a file: shown printable (control bytes as \xNN), so a
  // message stays one line.
  for (const auto& [name, t] : state) {
    if (!given.emplace(name, &t).second)
      throw ValueError("load_state_dict: entry '" + tg::detail::printable(name, 200) +
                       "' appears twice");
  }
  // Every check before the first copy, so a failed load leaves the model as it was.
  for (const auto& [name, p] : params) {
    const auto it = given.find(name);
    if (it == given.end()) throw ValueError("load_state_dict: missing entry '" + name + "'");
    check_fits("load_state_dict", name, *it->second, p);
  }
  if (given.size() != params.size()) {
    for (const auto& [name, t] : state) {
      const bool known =
          std::any_of(params.begin(), params.end(), [&](const auto& e) { return e.first == name; });
      if (!known)
        throw ValueError("load_state_dict: unexpected entry '" + tg::detail::printable(name, 200) +
                         "'");
    }
  }
  NoGradGuard no_grad;
  for (auto [name, p] : params) {
    const Tensor& src = *given.at(name);
    if (src.impl_ptr() == p.impl_ptr()) continue;
    const size_t bytes = static_cast<size_t>(p.numel()) * dtype_size(p.dtype());
    p.impl().storage->bump_version();
    if (bytes) std::memcpy(p.impl().storage->data(), src.impl().storage->data(), bytes);
  }
}

void Module::set_parameter(const std::string& name, const Tensor& value) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots);
  for (const auto& [slot_name, slot] : slots) {
    if (slot_name != name) continue;
    check_fits("set_parameter", name, value, *slot);
    *slot = value;
    return;
  }
  throw ValueError("set_parameter: no parameter named '" + name + "'");
}

}  // namespace tg::nn
