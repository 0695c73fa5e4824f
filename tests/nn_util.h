#pragma once
// What the nn suites share: a tiny GPT configuration, token tensors, random weights larger
// than the init, and the names of a state dict.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/gpt.h>

namespace tg::test {

inline nn::GPTConfig tiny(bool bias = true, bool attention_only = false) {
  return {.vocab_size = 5, .block_size = 4, .n_layer = 2, .n_head = 2, .n_embd = 4, .bias = bias,
          .attention_only = attention_only, .dtype = Dtype::f64};
}

inline Tensor tokens(const std::vector<int64_t>& v, int64_t B, int64_t T) {
  return from_indices(v, {B, T});
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// Weights larger than the init (the norms' weights around 1: GPT's ln_*, Llama's *norm), so
// every path carries a visible signal and gradient.
inline NamedTensors random_state(const nn::Module& model, Rng& rng) {
  NamedTensors state;
  for (const auto& [name, p] : model.named_parameters()) {
    std::vector<double> v = randn(p.shape(), rng, Dtype::f64, 0.5).to_vector();
    const bool norm = name.find("ln_") != std::string::npos || name.find("norm") != std::string::npos;
    if (norm && name.ends_with(".weight"))
      for (double& x : v) x += 1.0;
    state.emplace_back(name, from_vector(v, p.shape(), p.dtype()));
  }
  return state;
}

// A gradcheck of `loss` (the model's, at its parameters) in every parameter, from `state`.
template <class Model, class Loss>
GradcheckResult gradcheck_every_parameter(Model& model, const NamedTensors& state, Loss loss) {
  std::vector<std::string> param_names;
  std::vector<Tensor> inputs;
  for (const auto& [name, p] : state) {
    param_names.push_back(name);
    inputs.push_back(p);
  }
  const auto f = [&](const std::vector<Tensor>& params) {
    for (size_t i = 0; i < params.size(); ++i) model.set_parameter(param_names[i], params[i]);
    return loss();
  };
  return gradcheck(ScalarFunction(f), inputs);
}

// The names of `t`, in order: `names(m.state_dict())`.
inline std::vector<std::string> names(const NamedTensors& t) {
  std::vector<std::string> out;
  for (const auto& [name, v] : t) out.push_back(name);
  return out;
}

}  // namespace tg::test
