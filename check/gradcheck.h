#pragma once
// Gradient checking, after torch.autograd.gradcheck: the full Jacobian by central differences
//   J_num[o, k] = (f(x + eps e_k) - f(x - eps e_k))[o] / (2 eps)
// against the reverse-mode Jacobian (one backward per output element). An entry passes when
//   |analytical - numerical| <= atol + rtol * |numerical|.
// Beyond PyTorch: float inputs are checked in double by default (the same function runs on
// double copies); as PyTorch's, the inputs that require grad are checked and the others passed
// as constants, and when none requires grad every floating one is checked; int64 and bool
// inputs (indices, masks) are passed as they are; every derivative form is checked (the reverse pass once with the ops' kernels where
// they have one, once with their formulas only); and a check whose Jacobians are both (near)
// zero everywhere says it proves nothing.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/check/functional.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {

// Function (tensors in, tensors out) is the functional API's (check/functional.h).
using ScalarFunction = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  /// Compare v^T J u for random u, v (one pair per input) instead of the full Jacobian.
  bool fast_mode = false;
  /// Run the reverse pass twice and require bitwise-equal gradients.
  bool check_determinism = true;
  /// Convert float32 inputs to float64 before checking (the function must accept either).
  bool in_double = true;
  /// Jacobians with every entry at or below this are "zero": the check then proves nothing.
  double vacuous_tol = 1e-7;
  /// Print a warning to stderr when the check proves nothing (the result says so either way).
  bool warn_vacuous = true;
  /// Seed of fast mode's projections and of gradgradcheck's random grad_outputs.
  uint64_t seed = 0;
  /// gradcheck also checks forward mode (check_forward_ad below), where every op f meets has a
  /// tangent rule; where one has none, the result's forward_ad says so and nothing fails.
  bool check_forward_ad = true;
};

struct GradcheckResult {
  bool passed = true;
  bool deterministic = true;
  bool vacuous = false;  // both Jacobians (near) zero everywhere
  double max_abs_error = 0;
  double max_rel_error = 0;  // |a - n| / |n| over the entries with |n| > atol
  int64_t entries = 0;       // Jacobian entries (or projections) compared, once per form
  // The worst entry: the largest |a - n| / (atol + rtol |n|). Element indices are flat
  // (row-major) and -1 in fast mode, where a projection stands for the whole input.
  int input = -1;
  int64_t element = -1;
  int output = -1;
  int64_t output_element = -1;
  // The derivative form of the worst entry: every op's formula (in tg ops) and, where an op has
  // one, its kernel are checked on their own, so a wrong formula beside a right kernel fails.
  std::string form;
  double analytical = 0;
  double numerical = 0;
  std::string message;  // "ok", or what failed and where
  /// gradcheck's forward-mode check: "ok", "not checked: ..." (an op without a tangent rule, or
  /// check_forward_ad off), or what failed (then passed is false and message says it too).
  std::string forward_ad;
  std::vector<std::string> warnings;
  explicit operator bool() const { return passed; }
};

/// Checks every input's gradient of a function with one or more outputs. Throws what f throws.
GradcheckResult gradcheck(const Function& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});
GradcheckResult gradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

/// Forward mode checked as torch.autograd.gradcheck's check_forward_ad: for random tangents t of
/// the checked inputs (and weights u of the outputs), J t by one forward pass in a DualLevel
/// against central differences (atol + rtol; with every input's tangent, then each one's alone,
/// each recorded and with grad mode off, where ops with a tangent kernel run it; each run's
/// values against the plain forward's), and <u, J t> against <J^T u, t> from the reverse
/// pass (1e-10 relative in float64); with second_order, also forward over reverse (the tangent
/// of J^T u) against reverse over reverse (1e-9 relative). Throws what f throws, and GraphError
/// when f meets an op without a tangent rule.
GradcheckResult check_forward_ad(const Function& f, const std::vector<Tensor>& inputs,
                                 const GradcheckOptions& options = {}, bool second_order = false);

namespace detail {
/// Which inputs gradcheck checks: as torch.autograd.gradcheck, the ones that require grad; when
/// none does, every floating one. Int64 and bool inputs (indices, masks) never are.
std::vector<bool> checked_inputs(const std::vector<Tensor>& inputs);
}  // namespace detail

/// gradcheck of the first-order gradient: g(inputs, v) = grad(f(inputs), inputs, v) built with
/// create_graph, for random grad_outputs v, checked against central differences of itself.
GradcheckResult gradgradcheck(const Function& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});
GradcheckResult gradgradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});

}  // namespace tg
