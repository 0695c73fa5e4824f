#pragma once
// What the optim suites share: a small problem, parameters of ranks 1 to 3 (named as a model's)
// and a float64 gradient per update.

#include <cstdint>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg::optim::test_util {

struct Problem {
  NamedTensors params;                      // float64 leaves, the initial values
  std::vector<std::vector<Tensor>> grads;   // [update][parameter], float64
};

// Gradient scales 0.05, 0.15, 0.25, 0.35, ... so that clipping at 1 acts on some updates only.
inline Problem make_problem(int steps, uint64_t seed) {
  Rng rng(seed);
  Problem pr;
  pr.params = {{"h.0.w", randn({4, 3}, rng)},
               {"h.0.b", randn({3}, rng)},
               {"wpe", randn({2, 3, 2}, rng)},
               {"ln.g", randn({5}, rng)}};
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> g;
    for (const auto& [name, p] : pr.params)
      g.push_back(randn(p.shape(), rng, Dtype::f64, 0.05 * (1 + 2 * (s % 4))));
    pr.grads.push_back(g);
  }
  return pr;
}

// Fresh leaves that require grad: copies of `params` in `dtype`.
inline NamedTensors leaves(const NamedTensors& params, Dtype dtype) {
  NamedTensors out;
  for (const auto& [name, p] : params) out.emplace_back(name, p.detach().to(dtype).set_requires_grad());
  return out;
}

}  // namespace tg::optim::test_util
