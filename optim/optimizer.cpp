#include <tapegrad/optim/optimizer.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <set>
#include <utility>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/io/file_util.h>

namespace tg::optim {

namespace {

constexpr const char* kStepName = "optim.step";

std::string entry_name(const std::string& kind, const std::string& param) {
  return "optim." + kind + "." + param;
}

}  // namespace

Optimizer::Optimizer(std::string name, NamedTensors params, double lr,
                     std::vector<std::string> kinds)
    : name_(std::move(name)), params_(std::move(params)), kinds_(std::move(kinds)) {
  set_lr(lr);
  std::set<std::string> names;
  std::set<const Storage*> buffers;
  for (const auto& [pname, p] : params_) {
    if (!p.defined()) fail("parameter '" + pname + "' is undefined");
    if (!is_floating(p.dtype()))
      fail("parameter '" + pname + "' is " + dtype_name(p.dtype()) + "; only float32 and " +
           "float64 parameters can be optimized");
    if (!p.is_leaf())
      fail("parameter '" + pname + "' is not a leaf (made by " + p.op_name() +
           "); optimize the leaf, or detach() it first");
    if (!names.insert(pname).second) fail("parameter name '" + pname + "' is given twice");
    if (!buffers.insert(p.impl().storage.get()).second)
      fail("parameter '" + pname + "' shares its buffer with an earlier parameter (the same " +
           "tensor: tied weights are listed once)");
  }
  buffers_.resize(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (std::size_t k = 0; k < kinds_.size(); ++k)
      buffers_[i].push_back(zeros_like(params_[i].second));
}

void Optimizer::fail(const std::string& what) const { throw ValueError(name_ + ": " + what); }

void Optimizer::check_range(const char* option, double value, double lo, double hi) const {
  if (!(value >= lo && value < hi)) {
    std::ostringstream os;
    os << option << " must be in [" << lo << ", " << hi << "), got " << value;
    fail(os.str());
  }
}

void Optimizer::set_lr(double lr) {
  check_range("lr", lr, 0, std::numeric_limits<double>::infinity());
  lr_ = lr;
}

void Optimizer::step() {
  for (const auto& [pname, p] : params_) {  // all checked before any is written
    const Tensor g = p.grad();
    if (g.defined() && (g.dtype() != p.dtype() || g.shape() != p.shape()))
      fail("gradient of '" + pname + "' is " + g.shape().str() + " " + dtype_name(g.dtype()) +
           ", the parameter " + p.shape().str() + " " + dtype_name(p.dtype()));
  }
  NoGradGuard no_grad;
  ++step_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].second.grad();
    if (g.defined()) update(params_[i].second, g, buffers_[i], step_);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& [pname, p] : params_) set_to_none ? p.set_grad(Tensor()) : p.zero_grad();
}

NamedTensors Optimizer::state_dict() const {
  NamedTensors state = {{kStepName, scalar(static_cast<double>(step_), Dtype::f64)}};
  for (std::size_t k = 0; k < kinds_.size(); ++k)
    for (std::size_t i = 0; i < params_.size(); ++i)
      state.emplace_back(entry_name(kinds_[k], params_[i].first), buffers_[i][k].clone());
  return state;
}

void Optimizer::load_state_dict(const NamedTensors& state) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [ename, t] : state) {
    // Names from a file are shown printable (control bytes as \xNN), so a message stays one line.
    if (!given.emplace(ename, &t).second)
      fail("state entry '" + tg::detail::printable(ename, 200) + "' is given twice");
    if (!t.defined())
      fail("state entry '" + tg::detail::printable(ename, 200) + "' is undefined");
  }
  auto take = [&](const std::string& ename) -> const Tensor& {
    const auto it = given.find(ename);
    if (it == given.end()) fail("state entry '" + ename + "' is missing");
    const Tensor& t = *it->second;
    given.erase(it);
    return t;
  };

  // Validate everything first, so that a bad entry leaves the state as it was.
  const Tensor& step = take(kStepName);
  if (step.numel() != 1 || step.rank() != 0)
    fail(std::string("state entry '") + kStepName + "' must be rank 0, got " + step.shape().str());
  const double count = step.item();
  if (!(count >= 0) || count != std::floor(count) || count > 9007199254740992.0)
    fail(std::string("state entry '") + kStepName + "' must be a whole count >= 0, got " +
         std::to_string(count));
  std::vector<std::vector<Tensor>> buffers(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    for (const std::string& kind : kinds_) {
      const std::string ename = entry_name(kind, params_[i].first);
      const Tensor& t = take(ename);
      if (t.shape() != p.shape())
        fail("state entry '" + ename + "' has shape " + t.shape().str() + ", the parameter " +
             p.shape().str());
      if (!is_floating(t.dtype()))
        fail("state entry '" + ename + "' is " + dtype_name(t.dtype()) + ", not floating");
      buffers[i].push_back(t.to(p.dtype()));  // a copy: the caller's tensors stay theirs
    }
  }
  for (const auto& [ename, t] : state)  // the first leftover, in the caller's order
    if (given.count(ename))
      fail("unexpected state entry '" + tg::detail::printable(ename, 200) + "'");

  step_ = static_cast<int64_t>(count);
  buffers_ = std::move(buffers);
}

}  // namespace tg::optim
