// The normalisation and recurrent layers against the PyTorch layers themselves, float64, from
// the same weights and buffers: each layer runs a few training steps (every output, the gradient
// of sum(y * w) with fixed random weights w for every input and every parameter, to 1e-12
// relative), then one forward in evaluation mode; afterwards the whole state dict (BatchNorm's
// running statistics and num_batches_tracked) agrees, and so does the order of its names.
// Without python3, numpy and torch the suite skips, or fails when the environment variable CI
// is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/nn/norm.h>
#include <tapegrad/nn/rnn.h>
#include <tapegrad/ops/ops.h>
#include "nn_util.h"
#include "test_util.h"
#include "torch_util.h"

namespace tg::nn {
namespace {

namespace fs = std::filesystem;
using Inputs = const std::vector<Tensor>&;

struct LayerCase {
  std::string name;
  std::string torch_make;     // a Python expression: the torch module
  std::string torch_forward;  // a Python expression in m and xs: the list of outputs
  std::function<std::unique_ptr<Module>()> make;
  std::function<std::vector<Tensor>(Module&, Inputs)> forward;
  std::vector<Shape> inputs;  // drawn N(0, 1) afresh for every step; each gets a gradient
  int train_steps = 3;        // then one forward in evaluation mode
};

// A layer of one input and one output.
template <class L>
std::function<std::vector<Tensor>(Module&, Inputs)> one() {
  return [](Module& m, Inputs x) { return std::vector<Tensor>{static_cast<L&>(m)(x[0])}; };
}

double max_rel_diff(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  double scale = 0;
  for (double x : want.to_vector()) scale = std::max(scale, std::abs(x));
  return test::max_abs_diff(got, want) / std::max(scale, 1e-300);
}

Tensor as_f64(const Tensor& t) { return from_vector(t.to_vector(), t.shape(), Dtype::f64); }

// PyTorch's side: for every case folder, the module from its init.*.npy state, the same steps on
// the same inputs, its outputs, gradients and final state as .npy, and its state-dict names.
const char* kScript = R"(
import os, sys
import numpy as np
import torch

torch.set_default_dtype(torch.float64)
load = lambda p: torch.from_numpy(np.load(p))
save = lambda p, t: np.save(p, np.array(t.detach().to(torch.float64).numpy(), order="C"))

class RMSNormRef(torch.nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(C))

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight

def run(d, m, forward, steps):
    init = {k: load(os.path.join(d, "init." + k + ".npy")).to(v.dtype) for k, v in m.state_dict().items()}
    m.load_state_dict(init)
    with open(os.path.join(d, "keys.txt"), "w") as f:
        f.write(" ".join(m.state_dict().keys()))
    params = list(m.named_parameters())
    for k in range(steps + 1):
        m.train(k < steps)
        n = len([e for e in os.listdir(d) if e.startswith("s%d.in" % k)])
        xs = [load(os.path.join(d, "s%d.in%d.npy" % (k, j))).requires_grad_() for j in range(n)]
        ys = forward(m, xs)
        for j, y in enumerate(ys):
            save(os.path.join(d, "s%d.y%d.npy" % (k, j)), y)
        if k == steps:
            break
        L = sum((y * load(os.path.join(d, "s%d.w%d.npy" % (k, j)))).sum() for j, y in enumerate(ys))
        grads = torch.autograd.grad(L, xs + [p for _, p in params], allow_unused=True)
        for j, g in enumerate(grads):
            name = "dx%d" % j if j < n else "g." + params[j - n][0]
            like = xs[j] if j < n else params[j - n][1]
            save(os.path.join(d, "s%d.%s.npy" % (k, name)), torch.zeros_like(like) if g is None else g)
    for k, v in m.state_dict().items():
        save(os.path.join(d, "final." + k + ".npy"), v)
)";

void write_state(const Module& m, const fs::path& d, const std::string& prefix) {
  for (const auto& [name, t] : m.state_dict())
    write_npy((d / (prefix + name + ".npy")).string(), as_f64(t));
}

// Random weights and buffers (a running variance in [0.5, 1.5], a count of 5), so that loading
// them is tested too.
void randomise(Module& m, Rng& rng) {
  NoGradGuard no_grad;
  NamedTensors state = m.state_dict();
  for (auto& [name, t] : state) {
    if (t.dtype() == Dtype::i64)
      t = full(t.shape(), 5, Dtype::i64);
    else if (name.ends_with("running_var"))
      t = uniform(t.shape(), rng, 0.5, 1.5, t.dtype());
    else
      t = randn(t.shape(), rng, t.dtype());
  }
  m.load_state_dict(state);
}

void check_against_torch(const std::vector<LayerCase>& cases) {
  const test::TempDir tmp;
  std::string script = kScript;
  Rng rng(2031);
  struct Got {
    std::vector<std::vector<Tensor>> y, dx;        // per step, per output / input
    std::vector<NamedTensors> grads;               // per training step
    std::unique_ptr<Module> m;
  };
  std::vector<Got> got(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const LayerCase& c = cases[i];
    const fs::path d = tmp / std::to_string(i);
    fs::create_directories(d);
    Got& g = got[i];
    g.m = c.make();
    randomise(*g.m, rng);
    write_state(*g.m, d, "init.");
    for (int k = 0; k <= c.train_steps; ++k) {
      const bool training = k < c.train_steps;
      g.m->train(training);
      std::vector<Tensor> xs;
      for (std::size_t j = 0; j < c.inputs.size(); ++j) {
        xs.push_back(randn(c.inputs[j], rng, Dtype::f64).set_requires_grad());
        write_npy((d / ("s" + std::to_string(k) + ".in" + std::to_string(j) + ".npy")).string(), xs[j].detach());
      }
      const std::vector<Tensor> ys = c.forward(*g.m, xs);
      g.y.emplace_back();
      for (const Tensor& y : ys) g.y.back().push_back(y.detach());
      if (!training) break;
      Tensor L;
      for (std::size_t j = 0; j < ys.size(); ++j) {
        const Tensor w = randn(ys[j].shape(), rng, Dtype::f64);
        write_npy((d / ("s" + std::to_string(k) + ".w" + std::to_string(j) + ".npy")).string(), w);
        const Tensor t = sum(mul(ys[j], w));
        L = L.defined() ? add(L, t) : t;
      }
      g.m->zero_grad();
      L.backward();
      g.dx.emplace_back();
      for (const Tensor& x : xs) g.dx.back().push_back(x.grad());
      g.grads.emplace_back();
      for (const auto& [name, p] : g.m->named_parameters()) g.grads.back().emplace_back(name, p.grad().clone());
    }
    script += "run(" + std::string("'") + d.string() + "', " + c.torch_make + ", lambda m, xs: " +
              c.torch_forward + ", " + std::to_string(c.train_steps) + ")\n";
  }
  test::run_python(script);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const LayerCase& c = cases[i];
    const Got& g = got[i];
    SCOPED_TRACE(c.name);
    const fs::path d = tmp / std::to_string(i);
    const auto want = [&](const std::string& name) { return read_npy((d / (name + ".npy")).string()); };
    std::string keys;
    for (const auto& [name, t] : g.m->state_dict()) keys += (keys.empty() ? "" : " ") + name;
    EXPECT_EQ(keys, test::slurp(d / "keys.txt"));
    for (int k = 0; k <= c.train_steps; ++k) {
      SCOPED_TRACE("step " + std::to_string(k) + (k == c.train_steps ? " (eval)" : " (train)"));
      const std::string s = "s" + std::to_string(k) + ".";
      for (std::size_t j = 0; j < g.y[k].size(); ++j)
        EXPECT_LE(max_rel_diff(g.y[k][j], want(s + "y" + std::to_string(j))), 1e-12) << "output " << j;
      if (k == c.train_steps) break;
      for (std::size_t j = 0; j < g.dx[k].size(); ++j)
        EXPECT_LE(max_rel_diff(g.dx[k][j], want(s + "dx" + std::to_string(j))), 1e-12) << "input " << j;
      for (const auto& [name, dp] : g.grads[k])
        EXPECT_LE(max_rel_diff(dp, want(s + "g." + name)), 1e-12) << "parameter " << name;
    }
    for (const auto& [name, t] : g.m->state_dict())
      EXPECT_LE(max_rel_diff(as_f64(t), want("final." + name)), 1e-12) << "state " << name;
  }
}

TEST(LayersTorch, NormalisationLayersMatchPyTorch) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const Dtype f64 = Dtype::f64;
  const auto bn1 = [f64](int64_t C, BatchNormOptions o) {
    return [=] { return std::make_unique<BatchNorm1d>(C, o, f64); };
  };
  const std::vector<LayerCase> cases = {
      {"BatchNorm1d (N, C)", "torch.nn.BatchNorm1d(3)", "[m(xs[0])]", bn1(3, {}), one<BatchNorm1d>(), {{6, 3}}},
      {"BatchNorm1d (N, C, L), momentum 0.3, eps 1e-3",
       "torch.nn.BatchNorm1d(4, momentum=0.3, eps=1e-3)", "[m(xs[0])]",
       bn1(4, {.eps = 1e-3, .momentum = 0.3}), one<BatchNorm1d>(), {{2, 4, 5}}},
      {"BatchNorm1d without affine", "torch.nn.BatchNorm1d(2, affine=False)", "[m(xs[0])]",
       bn1(2, {.affine = false}), one<BatchNorm1d>(), {{3, 2, 4}}},
      {"BatchNorm2d", "torch.nn.BatchNorm2d(3)", "[m(xs[0])]",
       [f64] { return std::make_unique<BatchNorm2d>(3, BatchNormOptions{}, f64); },
       one<BatchNorm2d>(), {{2, 3, 4, 3}}},
      {"BatchNorm2d momentum None (the cumulative average)",
       "torch.nn.BatchNorm2d(3, momentum=None)", "[m(xs[0])]",
       [f64] { return std::make_unique<BatchNorm2d>(3, BatchNormOptions{.momentum = std::nullopt}, f64); },
       one<BatchNorm2d>(), {{2, 3, 4, 3}}},
      {"BatchNorm1d without running stats (the batch's in eval mode too)",
       "torch.nn.BatchNorm1d(3, track_running_stats=False)", "[m(xs[0])]",
       bn1(3, {.track_running_stats = false}), one<BatchNorm1d>(), {{5, 3, 2}}},
      {"GroupNorm(2, 6) (N, C, L)", "torch.nn.GroupNorm(2, 6)", "[m(xs[0])]",
       [f64] { return std::make_unique<GroupNorm>(2, 6, 1e-5, true, f64); }, one<GroupNorm>(),
       {{3, 6, 4}}},
      {"GroupNorm(3, 3) (N, C, H, W) without affine, eps 1e-3",
       "torch.nn.GroupNorm(3, 3, eps=1e-3, affine=False)", "[m(xs[0])]",
       [f64] { return std::make_unique<GroupNorm>(3, 3, 1e-3, false, f64); }, one<GroupNorm>(),
       {{2, 3, 3, 2}}},
      // torch 1.13 has no nn.RMSNorm: its formula, with torch.nn.RMSNorm's parameter name and
      // default eps (the dtype's machine epsilon).
      {"RMSNorm(5)", "RMSNormRef(5, None)", "[m(xs[0])]",
       [f64] { return std::make_unique<RMSNorm>(5, std::nullopt, true, f64); }, one<RMSNorm>(),
       {{2, 3, 5}}},
      {"RMSNorm(4, eps 1e-6)", "RMSNormRef(4, 1e-6)", "[m(xs[0])]",
       [f64] { return std::make_unique<RMSNorm>(4, 1e-6, true, f64); }, one<RMSNorm>(), {{3, 4}}},
  };
  check_against_torch(cases);
}

// The LSTM's and GRU's outputs with their final states, as lists (torch returns them nested).
constexpr const char* kLSTMOut = "(lambda o: [o[0], o[1][0], o[1][1]])";
constexpr const char* kGRUOut = "(lambda o: [o[0], o[1]])";

std::vector<Tensor> lstm_outputs(const LSTMOutput& o) { return {o.output, o.state.h, o.state.c}; }

TEST(LayersTorch, RecurrentLayersMatchPyTorch) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const Dtype f64 = Dtype::f64;
  Rng init(1);  // the weights are replaced by random ones before the run
  const auto lstm = [&](int64_t I, int64_t H, RNNOptions o) {
    return [&init, I, H, o, f64] { return std::make_unique<LSTM>(I, H, init, o, f64); };
  };
  const auto gru = [&](int64_t I, int64_t H, RNNOptions o) {
    return [&init, I, H, o, f64] { return std::make_unique<GRU>(I, H, init, o, f64); };
  };
  const auto lstm_with_state = [](Module& m, Inputs x) {
    return lstm_outputs(static_cast<LSTM&>(m)(x[0], {x[1], x[2]}));
  };
  const auto gru_with_state = [](Module& m, Inputs x) {
    const GRUOutput o = static_cast<GRU&>(m)(x[0], x.size() > 1 ? x[1] : Tensor());
    return std::vector<Tensor>{o.output, o.h_n};
  };
  const std::string with_state = "(m(xs[0], (xs[1], xs[2])))";
  const std::vector<LayerCase> cases = {
      {"LSTM(3, 5) over 20 steps from a given state", "torch.nn.LSTM(3, 5)",
       kLSTMOut + with_state, lstm(3, 5, {}), lstm_with_state, {{20, 2, 3}, {1, 2, 5}, {1, 2, 5}}, 1},
      {"LSTM(3, 4, num_layers=2, batch_first)", "torch.nn.LSTM(3, 4, num_layers=2, batch_first=True)",
       kLSTMOut + with_state, lstm(3, 4, {.num_layers = 2, .batch_first = true}), lstm_with_state,
       {{2, 6, 3}, {2, 2, 4}, {2, 2, 4}}, 1},
      {"LSTM(2, 3, bias=False) from zeros", "torch.nn.LSTM(2, 3, bias=False)",
       kLSTMOut + std::string("(m(xs[0]))"), lstm(2, 3, {.bias = false}),
       [](Module& m, Inputs x) { return lstm_outputs(static_cast<LSTM&>(m)(x[0])); }, {{5, 3, 2}}, 1},
      {"LSTM(3, 4, num_layers=2) unbatched", "torch.nn.LSTM(3, 4, num_layers=2)",
       kLSTMOut + with_state, lstm(3, 4, {.num_layers = 2}), lstm_with_state,
       {{6, 3}, {2, 4}, {2, 4}}, 1},
      {"GRU(3, 5, num_layers=2) from a given state", "torch.nn.GRU(3, 5, num_layers=2)",
       kGRUOut + std::string("(m(xs[0], xs[1]))"), gru(3, 5, {.num_layers = 2}), gru_with_state,
       {{7, 2, 3}, {2, 2, 5}}, 1},
      {"GRU(2, 3, bias=False, batch_first) from zeros",
       "torch.nn.GRU(2, 3, bias=False, batch_first=True)", kGRUOut + std::string("(m(xs[0]))"),
       gru(2, 3, {.bias = false, .batch_first = true}), gru_with_state, {{3, 4, 2}}, 1},
      {"LSTMCell(3, 4)", "torch.nn.LSTMCell(3, 4)", "list(m(xs[0], (xs[1], xs[2])))",
       [&init, f64] { return std::make_unique<LSTMCell>(3, 4, init, true, f64); },
       [](Module& m, Inputs x) {
         const LSTMState s = static_cast<LSTMCell&>(m)(x[0], {x[1], x[2]});
         return std::vector<Tensor>{s.h, s.c};
       },
       {{2, 3}, {2, 4}, {2, 4}}, 1},
      {"GRUCell(3, 4)", "torch.nn.GRUCell(3, 4)", "[m(xs[0], xs[1])]",
       [&init, f64] { return std::make_unique<GRUCell>(3, 4, init, true, f64); },
       [](Module& m, Inputs x) { return std::vector<Tensor>{static_cast<GRUCell&>(m)(x[0], x[1])}; },
       {{2, 3}, {2, 4}}, 1},
  };
  check_against_torch(cases);
}

}  // namespace
}  // namespace tg::nn
