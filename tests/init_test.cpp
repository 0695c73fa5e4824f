// nn::init as torch.nn.init: calculate_gain and the fans against PyTorch's numbers, the fills'
// bounds and variances over large tensors, their errors; Linear's default init is PyTorch's
// while the GPT's stays nanoGPT's. Keeps the library's own default dtype (no default_f64.cpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/init.h>
#include <tapegrad/nn/linear.h>

#include "test_util.h"
#include "torch_util.h"

namespace tg {
namespace {

using test::expect_throws;
using test::run_python;

// ---- nn::init --------------------------------------------------------------------------------

TEST(Init, GainsAndFansMatchPyTorch) {
  TG_REQUIRE_PYTHON("torch");
  struct Gain {
    const char* name;
    std::optional<double> param;
  };
  const std::vector<Gain> gains = {
      {"linear", {}}, {"conv2d", {}},          {"sigmoid", {}},     {"tanh", {}},
      {"relu", {}},   {"leaky_relu", {}},      {"leaky_relu", 0.2}, {"leaky_relu", std::sqrt(5.0)},
      {"selu", {}},   {"conv_transpose3d", {}}};
  const std::vector<Shape> shapes = {{3, 4}, {7, 1}, {16, 8, 5}, {32, 16, 3, 3}, {2, 3, 0, 4}};
  std::string script = "import math, torch\nfrom torch.nn import init\n";
  for (const Gain& g : gains)
    script += std::string("print(repr(init.calculate_gain('") + g.name + "'" +
              (g.param ? ", float.fromhex('" + test::hex_double(*g.param) + "')" : std::string()) +
              ")))\n";
  for (const Shape& s : shapes) {
    std::string dims;
    for (int64_t d : s.vec()) dims += std::to_string(d) + ",";
    script += "print(*init._calculate_fan_in_and_fan_out(torch.empty(" + dims + ")))\n";
  }
  std::istringstream out(run_python(script));
  for (const Gain& g : gains) {
    SCOPED_TRACE(g.name);
    double want = 0;
    out >> want;
    EXPECT_DOUBLE_EQ(nn::init::calculate_gain(g.name, g.param), want);
  }
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.str());
    int64_t fan_in = 0, fan_out = 0;
    out >> fan_in >> fan_out;
    const auto [in, o] = nn::init::calculate_fan_in_and_fan_out(Tensor(s, Dtype::f32));
    EXPECT_EQ(in, fan_in);
    EXPECT_EQ(o, fan_out);
  }
}

struct Stats {
  double min = INFINITY, max = -INFINITY, mean = 0, var = 0;
};
Stats stats(const Tensor& t) {
  Stats s;
  const std::vector<double> v = t.to_vector();
  for (double x : v) s.min = std::min(s.min, x), s.max = std::max(s.max, x), s.mean += x;
  s.mean /= v.size();
  for (double x : v) s.var += (x - s.mean) * (x - s.mean);
  s.var /= v.size() - 1;
  return s;
}

// The sample variance of n draws is within ~ var * sqrt(2 / n) of var (normal; less for
// uniform): 5 of those is the tolerance.
void expect_var(const Stats& s, double var, int64_t n) {
  EXPECT_NEAR(s.var, var, 5 * var * std::sqrt(2.0 / n));
  EXPECT_NEAR(s.mean, 0.0, 5 * std::sqrt(var / n));
}

TEST(Init, UniformAndNormalFillInPlaceWithTheirMoments) {
  Rng rng(1);
  Tensor t = zeros({200, 500}, Dtype::f64);
  const uint64_t before = t.version();
  nn::init::uniform_(t, rng, -2.0, 3.0);
  EXPECT_GT(t.version(), before);  // a write: a backward that saved t refuses afterwards
  Stats s = stats(t);
  EXPECT_GE(s.min, -2.0);
  EXPECT_LT(s.max, 3.0);
  EXPECT_NEAR(s.mean, 0.5, 5 * std::sqrt(25.0 / 12 / 1e5));
  EXPECT_NEAR(s.var, 25.0 / 12, 0.03);

  nn::init::normal_(t, rng, 3.0, 2.0);
  s = stats(t);
  EXPECT_NEAR(s.mean, 3.0, 5 * 2.0 / std::sqrt(1e5));
  EXPECT_NEAR(s.var, 4.0, 5 * 4.0 * std::sqrt(2.0 / 1e5));

  Tensor f = zeros({10});  // float32
  nn::init::constant_(f, 0.25);
  EXPECT_EQ(f.to_vector(), std::vector<double>(10, 0.25));
  nn::init::ones_(f);
  EXPECT_EQ(f.to_vector(), std::vector<double>(10, 1.0));
  nn::init::zeros_(f);
  EXPECT_EQ(f.to_vector(), std::vector<double>(10, 0.0));
  Tensor i = zeros({3}, Dtype::i64);
  nn::init::constant_(i, 7);
  EXPECT_EQ(i.to_vector(), std::vector<double>(3, 7.0));
}

TEST(Init, KaimingAndXavierHaveTheirBoundsAndVariances) {
  Rng rng(2);
  const int64_t out = 300, in = 400, n = out * in;
  Tensor w(Shape{out, in}, Dtype::f64);

  // kaiming_uniform_, leaky_relu with a = 0: gain sqrt(2), bound sqrt(6 / fan_in)
  nn::init::kaiming_uniform_(w, rng);
  double bound = std::sqrt(6.0 / in);
  Stats s = stats(w);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  EXPECT_GT(s.max, 0.999 * bound);  // the whole range is used
  expect_var(s, bound * bound / 3, n);

  // kaiming_normal_, fan_out, relu: std sqrt(2 / fan_out)
  nn::init::kaiming_normal_(w, rng, 0.0, "fan_out", "relu");
  expect_var(stats(w), 2.0 / out, n);

  // kaiming_uniform_ with a = sqrt(5) (Linear's): bound 1 / sqrt(fan_in)
  nn::init::kaiming_uniform_(w, rng, std::sqrt(5.0));
  s = stats(w);
  EXPECT_LE(std::max(-s.min, s.max), 1.0 / std::sqrt(in) * (1 + 1e-12));
  expect_var(s, 1.0 / (3.0 * in), n);

  // a conv weight (out, in, kh, kw): fan_in = 8 * 9, fan_out = 16 * 9
  Tensor c(Shape{16, 8, 3, 3}, Dtype::f64);
  nn::init::kaiming_uniform_(c, rng, 0.0, "fan_in", "tanh");
  bound = 5.0 / 3.0 * std::sqrt(3.0 / 72);
  s = stats(c);
  EXPECT_LE(std::max(-s.min, s.max), bound);
  EXPECT_GT(std::max(-s.min, s.max), 0.95 * bound);

  // xavier_uniform_ with gain 2: bound 2 sqrt(6 / (fan_in + fan_out))
  nn::init::xavier_uniform_(w, rng, 2.0);
  bound = 2.0 * std::sqrt(6.0 / (in + out));
  s = stats(w);
  EXPECT_GE(s.min, -bound);
  EXPECT_LE(s.max, bound);
  expect_var(s, bound * bound / 3, n);

  // xavier_normal_: std sqrt(2 / (fan_in + fan_out)), here of a float32 tensor
  Tensor w32(Shape{out, in}, Dtype::f32);
  nn::init::xavier_normal_(w32, rng);
  expect_var(stats(w32), 2.0 / (in + out), n);
}

TEST(Init, AZeroElementTensorDrawsNothing) {
  Rng a(9), b(9);
  Tensor empty(Shape{0, 5}, Dtype::f32);
  nn::init::kaiming_uniform_(empty, a);
  nn::init::kaiming_normal_(empty, a);
  nn::init::xavier_uniform_(empty, a);
  nn::init::uniform_(empty, a);
  EXPECT_EQ(a.uniform(0, 1), b.uniform(0, 1));
}

TEST(Init, BadArgumentsThrow) {
  Rng rng(0);
  Tensor v(Shape{5}, Dtype::f32), w(Shape{3, 4}, Dtype::f32), idx(Shape{3, 4}, Dtype::i64);
  struct Row {
    const char* name;
    std::function<void()> f;
    std::vector<std::string> fragments;
  };
  const std::vector<Row> rows = {
      {"gain of an unknown",
       [] { nn::init::calculate_gain("swish"); },
       {"calculate_gain", "swish"}},
      {"fans of rank 1",
       [&] { nn::init::calculate_fan_in_and_fan_out(v); },
       {"(5,)", "fewer than 2"}},
      {"kaiming of rank 1", [&] { nn::init::kaiming_uniform_(v, rng); }, {"fewer than 2"}},
      {"xavier of rank 1", [&] { nn::init::xavier_normal_(v, rng); }, {"fewer than 2"}},
      {"kaiming mode", [&] { nn::init::kaiming_normal_(w, rng, 0, "fan_avg"); }, {"fan_avg"}},
      {"kaiming nonlinearity",
       [&] { nn::init::kaiming_uniform_(w, rng, 0, "fan_in", "elu"); },
       {"calculate_gain", "elu"}},
      {"uniform a > b", [&] { nn::init::uniform_(w, rng, 1, 0); }, {"uniform_", "a = 1", "b = 0"}},
      {"normal std < 0", [&] { nn::init::normal_(w, rng, 0, -1); }, {"normal_", "std = -1"}},
      {"uniform of int64", [&] { nn::init::uniform_(idx, rng); }, {"uniform_", "int64"}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    expect_throws<ValueError>(r.f, r.fragments);
  }
}

// ---- Linear's init and the GPT's -------------------------------------------------------------

TEST(LinearInit, IsPyTorchsByDefault) {
  Rng rng(4);
  const int64_t in = 400, out = 300;
  const nn::Linear layer(in, out, true, rng, Dtype::f64);
  const double bound = 1.0 / std::sqrt(in);
  const Stats w = stats(layer.weight), b = stats(layer.bias);
  EXPECT_LE(std::max(-w.min, w.max), bound * (1 + 1e-12));
  EXPECT_GT(std::max(-w.min, w.max), 0.999 * bound);
  expect_var(w, bound * bound / 3, in * out);
  EXPECT_LE(std::max(-b.min, b.max), bound);
  EXPECT_GT(std::max(-b.min, b.max), 0.9 * bound);  // not zero: U(-bound, bound)

  // the draws, in order: the weight row-major, then the bias
  Rng again(4);
  const nn::Linear small(3, 2, true, again, Dtype::f64);
  Rng r(4);
  std::vector<double> want_w(6), want_b(2);
  const double b3 = 1 / std::sqrt(3.0);  // 1 / sqrt(in), in = 3 (kaiming's to rounding)
  for (double& x : want_w) x = r.uniform(-b3, b3);
  for (double& x : want_b) x = r.uniform(-b3, b3);
  const std::vector<double> got_w = small.weight.to_vector(), got_b = small.bias.to_vector();
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got_w[i], want_w[i], 1e-15);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(got_b[i], want_b[i], 1e-15);

  // in = 0: an empty weight and a zero bias, as PyTorch's bound 0
  const nn::Linear none(0, 3, true, rng);
  EXPECT_EQ(none.bias.to_vector(), std::vector<double>(3, 0.0));

  // an explicit init_std keeps nanoGPT's N(0, std^2) and a zero bias
  const nn::Linear gpt_style(in, out, true, rng, Dtype::f64, 0.02);
  expect_var(stats(gpt_style.weight), 0.02 * 0.02, in * out);
  EXPECT_EQ(stats(gpt_style.bias).max, 0.0);
}

// The GPT's init is nanoGPT's whatever Linear's default: each weight N(0, 0.02^2) (c_proj
// 0.02 / sqrt(2 n_layer)) drawn whole in named_parameters() order, biases 0, LayerNorm 1 and 0.
TEST(LinearInit, LeavesTheGptsNanoGptInitAsItWas) {
  const nn::GPTConfig config{.vocab_size = 7,
                             .block_size = 5,
                             .n_layer = 2,
                             .n_head = 2,
                             .n_embd = 8,
                             .dtype = Dtype::f64};
  Rng rng(11);
  const nn::GPT model(config, rng);
  Rng r(11);
  for (const auto& [name, p] : model.named_parameters()) {
    SCOPED_TRACE(name);
    const bool norm = name.find("ln_") != std::string::npos;
    const bool is_bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
    Tensor want;
    if (is_bias)
      want = zeros(p.shape(), Dtype::f64);
    else if (norm)
      want = ones(p.shape(), Dtype::f64);
    else if (name.find("c_proj") != std::string::npos)
      want = randn(p.shape(), r, Dtype::f64, 0.02 / std::sqrt(2.0 * config.n_layer));
    else
      want = randn(p.shape(), r, Dtype::f64, 0.02);
    EXPECT_TRUE(test::same_bytes(p, want));
  }
}

}  // namespace
}  // namespace tg
