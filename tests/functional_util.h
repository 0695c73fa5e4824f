#pragma once
// The functions the functional API's suites differentiate (functional_test, functional_torch_test;
// PyTorch's side of them in tests/functional_reference.py), float64, small enough for full
// Jacobians and Hessians:
//   attention: Y = multi_head_attention(X, W_Q, W_K, W_V, W_O) (nn/attention.h), X (T, D) = (4, 6),
//              d_k = d_v = 4, heads 1 or 2; its scalar form 0.5 * sum(Y^2) (attention_loss)
//   mlp:       y = tanh(x W1^T + b1) W2^T + b2, x (5, 3), 3 -> 6 -> 2; scalar: mean((y - t)^2)
//   gpt:       the tiny GPT (nn_util.h's tiny(): vocab 5, block 4, 2 layers, 2 heads, n_embd 4)
//              as a function of its parameters (in named_parameters() order): outputs the
//              flattened logits (B T V) and the loss; scalar: the loss. B = 2, T = 3.

#include <string>
#include <vector>

#include <tapegrad/check/functional.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/ops/ops.h>
#include "nn_util.h"

namespace tg::test {

struct Model {
  std::string name;       // as functional_reference.py knows it: attention1, attention2, mlp, gpt
  std::vector<Tensor> x;  // the inputs (float64)
  Function f;             // the tensor outputs
  Function scalar;        // one scalar output, for hessian, hvp and vhp
};

inline Model attention_model(int64_t heads, Rng& rng) {
  Model m{"attention" + std::to_string(heads), {}, {}, {}};
  for (const Shape& s : {Shape{4, 6}, Shape{6, 4}, Shape{6, 4}, Shape{6, 4}, Shape{4, 4}})
    m.x.push_back(randn(s, rng, Dtype::f64, 0.7));
  const auto Y = [heads](const std::vector<Tensor>& x) {
    return multi_head_attention(x[0], x[1], x[2], x[3], x[4], {.heads = heads}).Y;  // (T, d_v)
  };
  m.f = [Y](const std::vector<Tensor>& x) { return std::vector<Tensor>{Y(x)}; };
  m.scalar = [Y](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{attention_loss(Y(x))};
  };
  return m;
}

// The MLP's output y (5, 2) for x = {x, W1, b1, W2, b2}.
inline Tensor mlp_forward(const std::vector<Tensor>& x) {
  const Tensor h = tanh(add(matmul(x[0], x[1], false, true), x[2]));  // (5, 6)
  return add(matmul(h, x[3], false, true), x[4]);                     // (5, 2)
}

inline Model mlp_model(Rng& rng) {
  Model m{"mlp", {}, {}, {}};
  for (const Shape& s : {Shape{5, 3}, Shape{6, 3}, Shape{6}, Shape{2, 6}, Shape{2}})
    m.x.push_back(randn(s, rng, Dtype::f64, 0.8));
  const Tensor t = randn({5, 2}, rng, Dtype::f64);  // the targets, a constant
  m.f = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{mlp_forward(x)}; };
  m.scalar = [t](const std::vector<Tensor>& x) {
    const Tensor d = sub(mlp_forward(x), t);
    return std::vector<Tensor>{mean(mul(d, d))};
  };
  m.x.push_back(t);  // not an input of f: kept for PyTorch's side (see inputs_of)
  return m;
}

// The MLP keeps its targets as its last tensor (for the files PyTorch reads); the functions
// take the others.
inline std::vector<Tensor> inputs_of(const Model& m) {
  return m.name == "mlp" ? std::vector<Tensor>(m.x.begin(), m.x.end() - 1) : m.x;
}

// The GPT's token ids and targets (B = 2, T = 3; one target ignored).
inline Tensor gpt_idx() { return tokens({0, 4, 2, 3, 1, 1}, 2, 3); }
inline Tensor gpt_targets() { return tokens({4, 2, -1, 1, 1, 0}, 2, 3); }

inline Model gpt_model(Rng& rng) {
  auto gpt = std::make_shared<nn::GPT>(tiny(), rng);
  gpt->load_state_dict(random_state(*gpt, rng));
  Model m{"gpt", {}, {}, {}};
  std::vector<std::string> names;
  for (const auto& [name, p] : gpt->named_parameters()) {
    names.push_back(name);
    m.x.push_back(p.detach().clone());
  }
  // The model computes with the tensors it is given: each call makes them its parameters.
  const auto use = [gpt, names](const std::vector<Tensor>& x) {
    for (std::size_t k = 0; k < names.size(); ++k) gpt->set_parameter(names[k], x[k]);
  };
  m.f = [gpt, use](const std::vector<Tensor>& x) {
    use(x);
    const Tensor logits = gpt->forward(gpt_idx());  // (B, T, V)
    return std::vector<Tensor>{reshape(logits, {-1}), gpt->loss(gpt_idx(), gpt_targets())};
  };
  m.scalar = [gpt, use](const std::vector<Tensor>& x) {
    use(x);
    return std::vector<Tensor>{gpt->loss(gpt_idx(), gpt_targets())};
  };
  return m;
}

// The three of them, from fixed seeds.
inline std::vector<Model> models() {
  Rng rng(2201);
  std::vector<Model> all;
  all.push_back(attention_model(1, rng));
  all.push_back(attention_model(2, rng));
  all.push_back(mlp_model(rng));
  all.push_back(gpt_model(rng));
  return all;
}

}  // namespace tg::test
