#pragma once
// The attention-invariant checker: the lesson's sanity checks, run on any attention function
// built from ops (the user's own variant).
//
//   1. shapes:     Q, K (.., T, d_k), V (.., T, d_v), A (.., T, T), Y (.., T, d_out)
//   2. row sums:   every row of A sums to 1
//   3. mask:       A[i, j] == 0 exactly for j > i (and for j <= i - w with a window w)
//   4. first row:  Y[0] == V[0] (times W_O where present; heads concatenated)
//   5. causality:  dY_i / dX_j == 0 exactly for every j > i (and outside the window), through
//                  autodiff; and no position depends on another batch entry
//   6. gradients:  gradcheck of Y with respect to X and every parameter

#include <functional>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/nn/attention.h>

namespace tg {

/// A user's attention: X and the parameters in, everything it computed out.
using AttentionFn =
    std::function<AttentionOutput(const Tensor& X, const std::vector<Tensor>& params)>;

struct InvariantResult {
  std::string name;    // "rows of A sum to 1"
  bool passed = false;
  double value = 0;    // the measured number (max deviation, max leaked weight, ...)
  std::string detail;  // the numbers behind the verdict
};

struct InvariantReport {
  std::vector<InvariantResult> results;
  bool passed() const;
  /// One line per invariant: PASS/FAIL, name, detail.
  std::string str() const;
};

struct CheckerOptions {
  int64_t window = 0;           // the window the variant claims (0: plain causal)
  bool check_gradients = true;  // gradcheck every parameter (the slowest part)
  GradcheckOptions gradcheck;   // tolerances of item 6
  std::vector<std::string> parameter_names;  // for the report: {"W_Q", ...}; else "parameter k"
};

/// Runs every invariant on f at (X, params); a failing invariant is reported, never thrown.
/// Throws what f throws.
InvariantReport check_attention(const AttentionFn& f, const Tensor& X,
                                const std::vector<Tensor>& params,
                                const CheckerOptions& options = {});

}  // namespace tg
