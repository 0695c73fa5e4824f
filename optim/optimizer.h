#pragma once
// Optimizer: what SGD and AdamW share, as torch.optim.Optimizer. It holds the parameters by name,
// the step count and, per parameter, the state buffers of the concrete optimizer (AdamW's m and
// v, SGD's momentum), all allocated as zeros up front, so state_dict() is complete from the
// start and a resumed run continues bit for bit:
//   "optim.step"          rank 0, float64: the number of step() calls so far
//   "optim.KIND.NAME"     one buffer per kind and parameter, the parameter's shape and dtype
// The step count is one for the optimizer, where torch counts per parameter; they differ only
// for a parameter that has no gradient on some steps (torch skips its count too).

#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (the others are skipped, as torch does),
  /// written in place under NoGradGuard, so each parameter's version moves on. Throws ValueError,
  /// before writing anything, when a gradient's shape or dtype is not its parameter's.
  void step();
  /// Drops every parameter's gradient, as torch's zero_grad(set_to_none=True), its default since
  /// 2.0: the next backward's gradients become .grad() as they are, with nothing zeroed first or
  /// added into, and a parameter that gets none is skipped by step(). With set_to_none = false,
  /// zeroes them in place instead, as Tensor::zero_grad (keeps the buffers: a handle to .grad()
  /// sees the zeros). Throws nothing.
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  /// Sets the learning rate for the next steps (a schedule calls it before each update); throws
  /// ValueError when lr is negative or not finite.
  void set_lr(double lr);
  /// The number of step() calls so far (restored by load_state_dict).
  int64_t step_count() const { return step_; }
  const NamedTensors& params() const { return params_; }

  /// The state as copies: "optim.step", then "optim.KIND.NAME" per kind and parameter; throws
  /// nothing.
  NamedTensors state_dict() const;
  /// Restores a state_dict() (copies it; floating buffers are converted to the parameter's
  /// dtype, as torch does). Strict: throws ValueError naming the first missing, unexpected,
  /// repeated, undefined or misshapen entry, or a step that is not a count; on a throw the state
  /// is unchanged.
  void load_state_dict(const NamedTensors& state);

 protected:
  /// `name` labels errors ("AdamW"); `kinds` names the per-parameter buffers ({"m", "v"}).
  /// Throws ValueError for a bad lr, an undefined, non-leaf or int64 parameter, or a name or
  /// tensor given twice.
  Optimizer(std::string name, NamedTensors params, double lr, std::vector<std::string> kinds);

  /// Updates the parameter from its gradient g at step t (1 for the first step), with its
  /// buffers (one per kind, in the order of `kinds`). Runs under NoGradGuard.
  virtual void update(Tensor& param, const Tensor& g, std::vector<Tensor>& buffers,
                      int64_t t) = 0;

  /// Throws ValueError "NAME: WHAT" (the optimizer's name first).
  [[noreturn]] void fail(const std::string& what) const;
  /// Throws ValueError "NAME: OPTION must be in [lo, hi), got VALUE" unless lo <= value < hi.
  void check_range(const char* option, double value, double lo, double hi) const;

  std::string name_;

 private:
  NamedTensors params_;
  std::vector<std::string> kinds_;
  std::vector<std::vector<Tensor>> buffers_;  // [parameter][kind]
  double lr_ = 0;
  int64_t step_ = 0;
};

}  // namespace tg::optim
