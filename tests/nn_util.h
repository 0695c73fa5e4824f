#pragma once
// What the nn suites share: a tiny GPT configuration, token tensors, random weights larger
// than the init, and the names of a state dict.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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

// Weights larger than the init (LayerNorm weights around 1), so every path carries a visible
// signal and gradient.
inline NamedTensors random_state(const nn::Module& model, Rng& rng) {
  NamedTensors state;
  for (const auto& [name, p] : model.named_parameters()) {
    std::vector<double> v = randn(p.shape(), rng, Dtype::f64, 0.5).to_vector();
    if (name.find("ln_") != std::string::npos && name.ends_with(".weight"))
      for (double& x : v) x += 1.0;
    state.emplace_back(name, from_vector(v, p.shape(), p.dtype()));
  }
  return state;
}

// The names of `t`, in order: `names(m.state_dict())`.
inline std::vector<std::string> names(const NamedTensors& t) {
  std::vector<std::string> out;
  for (const auto& [name, v] : t) out.push_back(name);
  return out;
}

}  // namespace tg::test
