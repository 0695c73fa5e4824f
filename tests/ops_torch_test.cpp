// The ops with PyTorch's axis arguments against PyTorch itself (tests/ops_reference.py):
// softmax / log_softmax over any dim, transpose of any two dims, sum / mean over several dims
// with keepdim, cross_entropy on (..., V) logits with ignore_index, class weights and label
// smoothing; the elementwise ops, rms_norm and the losses of the recurrent and Llama models
// (several inputs, edge values given: ties, bounds, 0, the softplus threshold). For every case
// the float64 output and the gradient of sum(y * w), w fixed random weights, for every float
// input agree to 1e-12 relative; for the cases of several inputs the float32 forward agrees to
// 1e-5 too. Convolution and pooling are in ops_torch_conv_test.cpp, the reductions and the
// index ops in ops_torch_axis_test.cpp. Without python3, numpy and torch the suite skips, or
// fails when the environment variable CI is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/ops/ops.h>
#include "ops_torch_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using tg::Tensor;
using tg::test::max_rel_diff;

struct TorchCase {
  std::string spec;  // "<op> key=value ...", as ops_reference.py reads it
  tg::Shape shape;   // of x
  std::function<Tensor(const Tensor&)> op;
  Tensor targets{}, weight{};  // cross_entropy and nll_loss only
  // An op of several float inputs (x, x1, x2 ...): given values, or N(0, 2) draws of shape and
  // `more`; every input gets a gradient, and the float32 forward is compared too.
  std::function<Tensor(const std::vector<Tensor>&)> multi{};
  std::vector<tg::Shape> more{};
  std::vector<Tensor> given{};
  Tensor pos_weight{};  // binary_cross_entropy_with_logits only
};

using Ins = const std::vector<Tensor>&;
Tensor f64(std::vector<double> v, tg::Shape s) { return tg::from_vector(v, s).to(tg::Dtype::f64); }
constexpr double kInf = INFINITY;
// A number as ops_reference.py reads it back exactly ("0.3333333333333333", not "0.333333").
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// The ops of the recurrent and Llama models, each with the edges where PyTorch defines a value.
void model_op_cases(std::vector<TorchCase>& c) {
  auto un = [&](std::string spec, tg::Shape s, std::function<Tensor(const Tensor&)> f,
                std::vector<Tensor> given = {}) {
    TorchCase k{spec, s, {}};
    k.multi = [f](Ins x) { return f(x[0]); };
    k.given = std::move(given);
    c.push_back(k);
  };
  const Tensor edges = f64({-800, -40, -20.5, -3, -0.5, 0, 0.5, 2.5, 19.5, 20, 20.5, 40, 800}, {13});
  for (const tg::Shape& s : {tg::Shape{3, 4}, tg::Shape{1, 5}, tg::Shape{5, 1}, tg::Shape{2, 3, 2, 2}}) {
    un("sigmoid", s, [](const Tensor& x) { return tg::sigmoid(x); });
    un("silu", s, [](const Tensor& x) { return tg::silu(x); });
    un("softplus beta=1 threshold=20", s, [](const Tensor& x) { return tg::softplus(x); });
    un("abs", s, [](const Tensor& x) { return tg::abs(x); });
    un("clamp lo=-0.5 hi=1", s, [](const Tensor& x) { return tg::clamp(x, -0.5, 1.0); });
  }
  un("sigmoid", {13}, [](const Tensor& x) { return tg::sigmoid(x); }, {edges});
  un("silu", {13}, [](const Tensor& x) { return tg::silu(x); }, {edges});
  un("softplus beta=1 threshold=20", {13}, [](const Tensor& x) { return tg::softplus(x); }, {edges});
  un("softplus beta=2 threshold=5", {13}, [](const Tensor& x) { return tg::softplus(x, 2, 5); }, {edges});
  un("softplus beta=-1.5 threshold=20", {3, 4}, [](const Tensor& x) { return tg::softplus(x, -1.5); });
  un("abs", {13}, [](const Tensor& x) { return tg::abs(x); }, {edges});
  // clamp at its bounds (the gradient passes, as PyTorch's), one-sided, lo = hi.
  const Tensor at_bounds = f64({-1, -0.5, -0.25, 0, 0.5, 1, 1.5, 0.25}, {2, 4});
  un("clamp lo=-0.5 hi=0.5", {2, 4}, [](const Tensor& x) { return tg::clamp(x, -0.5, 0.5); }, {at_bounds});
  un("clamp lo=-0.25 hi=inf", {2, 4}, [](const Tensor& x) { return tg::clamp(x, -0.25, kInf); }, {at_bounds});
  un("clamp lo=-inf hi=0", {2, 4}, [](const Tensor& x) { return tg::clamp(x, -kInf, 0.0); }, {at_bounds});
  un("clamp lo=0.25 hi=0.25", {2, 4}, [](const Tensor& x) { return tg::clamp(x, 0.25, 0.25); }, {at_bounds});
  // pow: integer powers of any sign of x, fractional ones of x >= 0 with 0 among them.
  const Tensor nonneg = f64({0, 0.5, 1, 2.5, 0, 3, 0.1, 4}, {2, 4});
  const Tensor signed_ = f64({0, -0.5, 1, -2.5, 0, 3, -0.1, 4}, {2, 4});
  for (double p : {2.0, 3.0, 1.0, 0.0})
    un("pow p=" + num(p), {2, 4}, [p](const Tensor& x) { return tg::pow(x, p); }, {signed_});
  for (double p : {0.5, 1.0 / 3, 1.5, 2.5, 0.0})
    un("pow p=" + num(p), {2, 4}, [p](const Tensor& x) { return tg::pow(x, p); }, {nonneg});
  for (double p : {-1.0, -0.5, 0.75})
    un("pow p=" + num(p) + " abs_plus=0.5", {2, 4}, [p](const Tensor& x) { return tg::pow(tg::add(tg::abs(x), 0.5), p); });
  // maximum / minimum: broadcasting, ties (split half and half), -inf.
  for (const char* op : {"maximum", "minimum"}) {
    const bool mx = op[1] == 'a';
    auto bin = [mx](Ins x) { return mx ? tg::maximum(x[0], x[1]) : tg::minimum(x[0], x[1]); };
    for (const auto& [a, b] : std::vector<std::pair<tg::Shape, tg::Shape>>{
             {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{4}, {3, 4}}, {{3, 1}, {1, 4}}, {{2, 3}, {}},
             {{2, 1, 3, 1}, {1, 2, 1, 2}}, {{1, 5}, {5, 1}}, {{2, 1, 2, 1, 3}, {2, 1, 2, 1}},
             {{1, 2, 1, 2, 1, 3}, {2, 1, 2, 1, 3, 1}}, {{3}, {2, 1, 2, 1, 2, 3}}}) {
      TorchCase k{op, a, {}};
      k.multi = bin;
      k.more = {b};
      c.push_back(k);
    }
    TorchCase ties{op, {2, 4}, {}};
    ties.multi = bin;
    ties.given = {f64({1, -2, 0.5, 3, 0, -1, -kInf, 2}, {2, 4}), f64({1, -1, 0.5, 2, 0, -3, 1, -kInf}, {2, 4})};
    c.push_back(ties);
    TorchCase bties{op, {3, 2}, {}};
    bties.multi = bin;
    bties.given = {f64({0.5, -1, 0.5, 2, 0.5, -1}, {3, 2}), f64({0.5, -1}, {2})};
    c.push_back(bties);
  }
  // rms_norm with and without weight, every rank. At C = 1 the gradient is r w eps / (x^2 + eps),
  // what is left of terms that cancel to 1 part in x^2 / eps, so there eps is 0.1, not 1e-6.
  for (const tg::Shape& s : {tg::Shape{5}, tg::Shape{4, 6}, tg::Shape{3, 1}, tg::Shape{2, 3, 4}, tg::Shape{2, 1, 3, 5}}) {
    const double eps = s[s.rank() - 1] == 1 ? 0.1 : 1e-6;
    TorchCase k{"rms_norm eps=" + num(eps) + " weight=1", s, {}};
    k.multi = [eps](Ins x) { return tg::rms_norm(x[0], x[1], eps); };
    k.more = {{s[s.rank() - 1]}};
    c.push_back(k);
    TorchCase n{"rms_norm eps=0.1 weight=0", s, {}};
    n.multi = [](Ins x) { return tg::rms_norm(x[0], Tensor(), 0.1); };
    c.push_back(n);
  }
  // The losses, with every reduction.
  const std::pair<const char*, tg::Reduction> reductions[] = {
      {"mean", tg::Reduction::mean}, {"sum", tg::Reduction::sum}, {"none", tg::Reduction::none}};
  for (const auto& [r, red] : reductions) {
    const std::string rs = std::string(" reduction=") + r;
    for (const tg::Shape& s : {tg::Shape{3, 4}, tg::Shape{5}, tg::Shape{}, tg::Shape{2, 3, 1, 2}}) {
      TorchCase m{"mse_loss" + rs, s, {}};
      m.multi = [red = red](Ins x) { return tg::mse_loss(x[0], x[1], red); };
      m.more = {s};
      c.push_back(m);
      TorchCase l{"l1_loss" + rs, s, {}};
      l.multi = [red = red](Ins x) { return tg::l1_loss(x[0], x[1], red); };
      l.more = {s};
      c.push_back(l);
      TorchCase b{"binary_cross_entropy_with_logits" + rs, s, {}};
      b.multi = [red = red](Ins x) { return tg::binary_cross_entropy_with_logits(x[0], x[1], red); };
      b.more = {s};
      c.push_back(b);
    }
    TorchCase l0{"l1_loss" + rs, {2, 2}, {}};  // x = y in places: the gradient 0 there
    l0.multi = [red = red](Ins x) { return tg::l1_loss(x[0], x[1], red); };
    l0.given = {f64({1, -2, 0.5, 3}, {2, 2}), f64({1, -1, 0.5, 2}, {2, 2})};
    c.push_back(l0);
    TorchCase bl{"binary_cross_entropy_with_logits" + rs, {2, 4}, {}};  // large logits
    bl.multi = [red = red](Ins x) { return tg::binary_cross_entropy_with_logits(x[0], x[1], red); };
    bl.given = {f64({-800, -40, -3, 0, 2.5, 40, 800, 30}, {2, 4}), f64({0.2, 0.9, 0.5, 0.1, 1, 0, 0.3, 0.7}, {2, 4})};
    c.push_back(bl);
    TorchCase bp{"binary_cross_entropy_with_logits" + rs, {3, 4}, {}};
    bp.pos_weight = f64({0.5, 2.0, 3.0, 1.0}, {4});
    bp.multi = [red = red, pw = bp.pos_weight](Ins x) {
      return tg::binary_cross_entropy_with_logits(x[0], x[1], {.pos_weight = pw.to(x[0].dtype()), .reduction = red});
    };
    bp.more = {{3, 4}};
    c.push_back(bp);
    struct Nll {
      tg::Shape shape;
      std::vector<int64_t> targets;
      tg::Shape target_shape;
      std::vector<double> weight;
      int64_t ignore_index;
    };
    const std::vector<Nll> nll = {
        {{4, 5}, {1, 0, 4, 2}, {4}, {}, -100},
        {{4, 5}, {1, -100, 4, 4}, {4}, {0.5, 2.0, 1.0, 0.25, 3.0}, -100},
        {{2, 5, 3}, {1, 0, 4, 2, 2, 3}, {2, 3}, {}, 2},
        {{2, 5, 1, 2}, {1, 0, 4, 3}, {2, 1, 2}, {0.5, 2.0, 1.0, 0.25, 3.0}, -1},
        {{5}, {3}, {}, {}, -100},
        {{3, 1}, {0, 0, -100}, {3}, {2.0}, -100},
    };
    for (const Nll& e : nll) {
      TorchCase k{"nll_loss" + rs + " ignore_index=" + std::to_string(e.ignore_index), e.shape, {}};
      k.targets = tg::from_indices(e.targets, e.target_shape);
      if (!e.weight.empty()) k.weight = f64(e.weight, {static_cast<int64_t>(e.weight.size())});
      k.multi = [t = k.targets, w = k.weight, ii = e.ignore_index, red = red](Ins x) {
        return tg::nll_loss(x[0], t, {.weight = w.defined() ? w.to(x[0].dtype()) : Tensor(),
                                      .ignore_index = ii, .reduction = red});
      };
      c.push_back(k);
    }
  }
}

std::vector<TorchCase> cases() {
  std::vector<TorchCase> c;
  for (const char* name : {"softmax", "log_softmax"}) {
    const bool log = name[0] == 'l';
    const std::vector<std::pair<tg::Shape, int>> dims = {
        {{5}, 0},          {{1, 5}, 0},          {{1, 5}, -1},         {{5, 1}, 0},
        {{3, 5}, 0},       {{3, 5}, -1},         {{2, 3, 4}, 0},       {{2, 3, 4}, 1},
        {{2, 3, 4}, -1},   {{2, 3, 4}, -3},      {{2, 3, 2, 4}, 1},    {{2, 3, 2, 4}, -2},
        {{2, 1, 3, 4}, 3}, {{2, 3, 1, 4}, -4}, {{2, 1, 3, 2, 2}, 2}, {{2, 1, 2, 3, 1, 2}, -6},
        {{2, 1, 2, 3, 1, 2}, -1}};
    for (const auto& [s, d] : dims)
      c.push_back({std::string(name) + " dim=" + std::to_string(d), s, [log, d = d](const Tensor& x) {
                     return log ? tg::log_softmax(x, d) : tg::softmax(x, d);
                   }});
  }
  const std::vector<std::tuple<tg::Shape, int, int>> pairs = {
      {{3, 4}, 0, 1},     {{3, 4}, -1, -2},     {{1, 5}, 0, 1},     {{5, 1}, 1, 0},
      {{4}, 0, -1},       {{2, 3, 4}, 0, 1},    {{2, 3, 4}, 0, 2},  {{2, 3, 4}, -1, -2},
      {{2, 3, 4, 5}, 1, 3}, {{2, 3, 4, 5}, -4, -1}, {{2, 3, 4, 5}, 2, 3}, {{2, 3, 4, 5}, 1, 1},
      {{2, 3, 1, 2, 2}, 0, 4}, {{2, 1, 3, 2, 1, 2}, 1, -3}, {{2, 1, 3, 2, 1, 2}, -6, -1}};
  for (const auto& [s, a, b] : pairs)
    c.push_back({"transpose dim0=" + std::to_string(a) + " dim1=" + std::to_string(b), s,
                 [a = a, b = b](const Tensor& x) { return tg::transpose(x, a, b); }});
  const std::vector<std::tuple<tg::Shape, std::vector<int>, bool>> reductions = {
      {{3, 4}, {0, 1}, false},      {{3, 4}, {1, 0}, true},        {{1, 5}, {0, -1}, true},
      {{5, 1}, {0}, false},         {{3, 4}, {}, false},           {{2, 3, 4}, {0, 2}, false},
      {{2, 3, 4}, {-1, -2}, true},  {{2, 3, 4}, {2, 0, 1}, true},  {{2, 3, 4, 5}, {1, 3}, false},
      {{2, 3, 4, 5}, {0, -2, -1}, true}, {{2, 3, 4, 5}, {-4, -3, -2, -1}, false},
      {{2, 3, 1, 2, 2}, {1, 4}, false},  {{2, 1, 3, 2, 1, 2}, {0, 2, -1}, true},
      {{2, 2, 1, 3, 2, 2}, {0, 1, 2, 4, 5}, false}};
  for (const char* name : {"sum", "mean"}) {
    const bool is_mean = name[1] == 'e';
    for (const auto& [s, dims, keep] : reductions) {
      std::string list;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) list += ",";
        list += std::to_string(dims[i]);
      }
      c.push_back({std::string(name) + " dims=" + list + " keepdim=" + (keep ? "1" : "0"), s,
                   [is_mean, dims = dims, keep = keep](const Tensor& x) {
                     return is_mean ? tg::mean(x, dims, keep) : tg::sum(x, dims, keep);
                   }});
    }
  }
  // cross_entropy: (B, T, V) and (N, V), ignored targets, weights, smoothing and all together.
  struct Ce {
    tg::Shape shape;
    std::vector<int64_t> targets;
    tg::Shape target_shape;
    std::vector<double> weight;
    int64_t ignore_index;
    double label_smoothing;
  };
  const std::vector<Ce> ce = {
      {{4, 5}, {1, 0, 4, 2}, {4}, {}, -100, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {}, -100, 0.0},
      {{2, 3, 5}, {1, -100, 4, 2, -100, 3}, {2, 3}, {}, -100, 0.0},
      {{2, 3, 5}, {1, -1, 4, 2, -1, 3}, {2, 3}, {}, -1, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -100, 0.0},
      {{2, 3, 5}, {1, -1, 4, 4, -1, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -1, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {}, -100, 0.1},
      {{2, 3, 5}, {1, -1, 4, 2, -1, 3}, {2, 3}, {}, -1, 0.3},
      {{2, 3, 5}, {1, -1, 4, 4, -1, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -1, 0.2},
      {{4, 5}, {2, 4, 2, 0}, {4}, {0.5, 2.0, 1.0, 0.25, 3.0}, 2, 0.15},
      {{3, 5}, {2, 4, 0}, {3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -100, 1.0},
      {{2, 1, 2, 3}, {2, 0, -100, 1}, {2, 1, 2}, {1.5, 0.2, 1.0}, -100, 0.05},
      {{1, 7}, {6}, {1}, {}, -100, 0.0},
      {{6}, {3}, {}, {}, -100, 0.4},
  };
  for (const Ce& e : ce) {
    tg::CrossEntropyOptions o;
    o.ignore_index = e.ignore_index;
    o.label_smoothing = e.label_smoothing;
    if (!e.weight.empty())
      o.weight = tg::from_vector(e.weight, {static_cast<int64_t>(e.weight.size())}).to(tg::Dtype::f64);
    const Tensor t = tg::from_indices(e.targets, e.target_shape);
    c.push_back({"cross_entropy ignore_index=" + std::to_string(e.ignore_index) +
                     " label_smoothing=" + std::to_string(e.label_smoothing),
                 e.shape, [t, o](const Tensor& x) { return tg::cross_entropy(x, t, o); }, t,
                 o.weight});
  }
  model_op_cases(c);
  return c;
}

TEST(OpsTorch, MatchPyTorchInFloat64) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const tg::test::TempDir tmp;
  const std::vector<TorchCase> all = cases();
  std::string list;
  tg::Rng rng(2026);
  std::vector<Tensor> ys, y32s;
  std::vector<std::vector<Tensor>> dxs;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TorchCase& c = all[i];
    const fs::path d = tmp / std::to_string(i);
    fs::create_directories(d);
    std::vector<Tensor> xs = c.given;
    if (xs.empty()) {
      xs.push_back(tg::randn(c.shape, rng, tg::Dtype::f64, 2.0));
      for (const tg::Shape& s : c.more) xs.push_back(tg::randn(s, rng, tg::Dtype::f64, 2.0));
    }
    for (Tensor& x : xs) x = x.detach().clone().set_requires_grad();
    const Tensor y = c.multi ? c.multi(xs) : c.op(xs[0]);
    const Tensor w = tg::randn(y.shape(), rng, tg::Dtype::f64);
    tg::sum(tg::mul(y, w)).backward();
    for (std::size_t k = 0; k < xs.size(); ++k)
      tg::write_npy((d / (k ? "x" + std::to_string(k) + ".npy" : "x.npy")).string(), xs[k].detach());
    tg::write_npy((d / "w.npy").string(), w);
    if (c.targets.defined()) tg::write_npy((d / "targets.npy").string(), c.targets);
    if (c.weight.defined()) tg::write_npy((d / "weight.npy").string(), c.weight);
    if (c.pos_weight.defined()) tg::write_npy((d / "pos_weight.npy").string(), c.pos_weight);
    list += std::to_string(i) + " " + c.spec + "\n";
    ys.push_back(y.detach());
    std::vector<Tensor> g;
    for (const Tensor& x : xs) g.push_back(x.grad());
    dxs.push_back(g);
    if (c.multi) {  // the float32 forward on the same inputs rounded to float32
      std::vector<Tensor> x32;
      for (const Tensor& x : xs) x32.push_back(x.detach().to(tg::Dtype::f32));
      y32s.push_back(c.multi(x32));
    } else {
      y32s.push_back(Tensor());
    }
  }
  {
    std::FILE* f = std::fopen(tmp.file("cases.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(list.c_str(), f);
    std::fclose(f);
  }
  const std::string command = tg::test::kPython + " " + TAPEGRAD_OPS_REFERENCE_PY + " --dir " +
                              tmp.path().string() + " > " + tmp.file("log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(std::to_string(i) + " " + all[i].spec + " on " + all[i].shape.str());
    const fs::path d = tmp / std::to_string(i);
    EXPECT_LE(max_rel_diff(ys[i], tg::read_npy((d / "y.npy").string())), 1e-12);
    for (std::size_t k = 0; k < dxs[i].size(); ++k) {
      SCOPED_TRACE("gradient of input " + std::to_string(k));
      const std::string name = k ? "dx" + std::to_string(k) + ".npy" : "dx.npy";
      EXPECT_LE(max_rel_diff(dxs[i][k], tg::read_npy((d / name).string())), 1e-12);
    }
    if (y32s[i].defined()) {
      SCOPED_TRACE("float32 forward");
      const Tensor want = tg::read_npy((d / "y32.npy").string());
      EXPECT_EQ(want.dtype(), tg::Dtype::f32);
      EXPECT_LE(max_rel_diff(y32s[i], want), 1e-5);
    }
  }
}

}  // namespace
