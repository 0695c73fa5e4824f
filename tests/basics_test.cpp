// The basics a PyTorch user reaches for first, against PyTorch itself where it can say:
//   factories (arange, linspace, eye, full, rand, randint) and their errors;
//   nn::init (gains, fans, the fills' bounds and variances) and Linear's default init;
//   the default dtype (float32, settable; a new user's MLP runs on defaults);
//   printing (torch's str() of the same tensors, byte for byte).
// This suite keeps the library's own default dtype (it does not link default_f64.cpp).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/init.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/ops.h>

#include "test_util.h"

namespace tg {
namespace {

using test::DefaultDtypeScope;
using test::expect_throws;

// ---- running PyTorch -------------------------------------------------------------------------

// The stdout of `script` run by /usr/bin/python3 (the test fails on a nonzero exit).
std::string run_python(const std::string& script) {
  test::TempDir dir;
  test::spit(dir / "script.py", script);
  const std::string cmd = test::kPython + " " + dir.file("script.py") + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  const int status = pclose(pipe.release());
  EXPECT_EQ(status, 0) << out;
  return out;
}

// The blocks of `out` between lines "@@" (one per case).
std::vector<std::string> blocks(const std::string& out) {
  std::vector<std::string> b{""};
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line == "@@")
      b.emplace_back();
    else
      b.back() += (b.back().empty() ? "" : "\n") + line;
  }
  b.pop_back();  // after the last "@@"
  return b;
}

std::vector<double> numbers(const std::string& text) {
  std::vector<double> v;
  std::istringstream in(text);
  for (std::string w; in >> w;) v.push_back(std::strtod(w.c_str(), nullptr));
  return v;
}

// ---- factories -------------------------------------------------------------------------------

TEST(Factories, MatchPyTorch) {
  TG_REQUIRE_PYTHON("torch");
  struct Case {
    const char* torch;
    Tensor ours;
  };
  const std::vector<Case> cases = {
      {"torch.arange(5)", arange(5)},
      {"torch.arange(1, 10, 3)", arange(1, 10, 3)},
      {"torch.arange(10, 0, -3)", arange(10, 0, -3)},
      {"torch.arange(3, 3)", arange(3, 3)},
      {"torch.arange(0, 1, 0.1)", arange(0, 1, 0.1)},
      {"torch.arange(0, 0.3, 0.1)", arange(0, 0.3, 0.1)},  // ceil(2.9999999999999996) = 3
      {"torch.arange(1.0, 2.5, 0.5)", arange(1.0, 2.5, 0.5)},
      {"torch.arange(2.5)", arange(2.5)},
      {"torch.arange(-1, 1, 0.3, dtype=torch.float64)", arange(-1, 1, 0.3, Dtype::f64)},
      {"torch.arange(4, dtype=torch.float64)", arange(4, Dtype::f64)},
      {"torch.linspace(0, 1, 7)", linspace(0, 1, 7)},
      {"torch.linspace(-2, 3, 1)", linspace(-2, 3, 1)},
      {"torch.linspace(-2, 3, 0)", linspace(-2, 3, 0)},
      {"torch.linspace(3, -2, 4, dtype=torch.float64)", linspace(3, -2, 4, Dtype::f64)},
      {"torch.linspace(0.1, 0.7, 11)", linspace(0.1, 0.7, 11)},
      {"torch.linspace(0, 10, 5, dtype=torch.int64)", linspace(0, 10, 5, Dtype::i64)},
      {"torch.eye(3)", eye(3)},
      {"torch.eye(2, 4, dtype=torch.int64)", eye(2, 4, Dtype::i64)},
      {"torch.eye(0)", eye(0)},
      {"torch.full((2, 3), 1.5)", full({2, 3}, 1.5)},
      {"torch.full((2,), -7, dtype=torch.int64)", full({2}, -7, Dtype::i64)},
  };
  std::string script = "import torch\n";
  for (const Case& c : cases)
    script += std::string("t = ") + c.torch +
              "\nprint(str(t.dtype).replace('torch.', ''), tuple(t.shape))\n"
              "print(' '.join(repr(float(v)) for v in t.flatten().tolist()))\nprint('@@')\n";
  const std::vector<std::string> out = blocks(run_python(script));
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].torch);
    const Tensor& t = cases[i].ours;
    const std::string head = out[i].substr(0, out[i].find('\n'));
    EXPECT_EQ(head, std::string(dtype_name(t.dtype())) + " " + t.shape().str());
    const std::vector<double> want = numbers(out[i].substr(head.size()));
    EXPECT_EQ(t.to_vector(), want);  // exactly: same algorithm, same rounding
  }
}

TEST(Factories, ArangeTypesAsPyTorch) {
  EXPECT_EQ(arange(5).dtype(), Dtype::i64);
  EXPECT_EQ(arange(int64_t{2}, int64_t{9}, int64_t{2}).dtype(), Dtype::i64);
  EXPECT_EQ(arange(5.0).dtype(), get_default_dtype());
  EXPECT_EQ(arange(0, 1, 0.25).dtype(), get_default_dtype());
  EXPECT_EQ(arange(0, 6, 2, Dtype::f64).dtype(), Dtype::f64);
  // int64 exactly, beyond double's 2^53
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(arange(big, big + 3).data<int64_t>()[2], big + 2);
}

TEST(Factories, RandintDrawsEveryValueInRangeAndNoOther) {
  Rng rng(5);
  const Tensor t = randint(-3, 4, {100, 100}, rng);
  EXPECT_EQ(t.dtype(), Dtype::i64);
  EXPECT_EQ(t.shape(), (Shape{100, 100}));
  std::vector<int64_t> count(7, 0);
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_GE(p[i], -3);
    ASSERT_LT(p[i], 4);
    ++count[p[i] + 3];
  }
  for (int64_t c : count) EXPECT_NEAR(c, 10000.0 / 7, 5 * std::sqrt(10000.0 / 7));  // 5 sigma
  Rng again(5);
  EXPECT_TRUE(test::same_bytes(randint(-3, 4, {100, 100}, again), t));  // seeded
  Rng r2(1);
  const Tensor f = randint(0, 2, {3}, r2, Dtype::f64);
  EXPECT_EQ(f.dtype(), Dtype::f64);
  // the whole int64 range is one call (high - low passes int64)
  Rng r3(2);
  EXPECT_EQ(randint(INT64_MIN, INT64_MAX, {4}, r3).numel(), 4);
}

TEST(Factories, RandIsUniformOnZeroOne) {
  Rng rng(3);
  const Tensor t = rand({10000}, rng);
  EXPECT_EQ(t.dtype(), get_default_dtype());
  double mean = 0;
  for (double v : t.to_vector()) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    mean += v / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / 10000));
}

TEST(Factories, BadArgumentsThrowNamingTheFactory) {
  const double inf = INFINITY;
  Rng rng(0);
  struct Row {
    const char* name;
    std::function<void()> f;
    std::vector<std::string> fragments;
  };
  const std::vector<Row> rows = {
      {"arange int step 0", [] { arange(0, 5, 0); }, {"arange", "step must be nonzero"}},
      {"arange step 0", [] { arange(0.0, 5.0, 0.0); }, {"arange", "step must be nonzero"}},
      {"arange wrong sign", [] { arange(0, 5, -1); }, {"arange", "wrong side", "step = -1"}},
      {"arange wrong sign f", [] { arange(5.0, 0.0, 0.5); }, {"arange", "end = 0", "step = 0.5"}},
      {"arange infinite", [=] { arange(0.0, inf, 1.0); }, {"arange", "finite"}},
      {"arange nan", [] { arange(NAN); }, {"arange", "finite"}},
      {"linspace steps < 0", [] { linspace(0, 1, -1); }, {"linspace", "steps must be >= 0", "-1"}},
      {"eye n < 0", [] { eye(-1); }, {"eye", "n = -1"}},
      {"eye m < 0", [] { eye(2, -3); }, {"eye", "m = -3"}},
      {"randint low = high", [&] { randint(5, 5, {2}, rng); }, {"randint", "low = 5", "high = 5"}},
      {"randint low > high", [&] { randint(5, 2, {2}, rng); }, {"randint", "below high = 2"}},
      {"default int64", [] { set_default_dtype(Dtype::i64); }, {"set_default_dtype", "int64"}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    expect_throws<ValueError>(r.f, r.fragments);
  }
  EXPECT_EQ(get_default_dtype(), Dtype::f32);  // the refused set changed nothing
}

// A double exactly, as Python's float.fromhex reads it.
std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

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
              (g.param ? ", float.fromhex('" + hex(*g.param) + "')" : std::string()) + ")))\n";
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

// ---- the default dtype -----------------------------------------------------------------------

TEST(DefaultDtype, IsFloat32ForEveryFactoryAndLayer) {
  ASSERT_EQ(get_default_dtype(), Dtype::f32);
  Rng rng(0);
  for (const Tensor& t : {zeros({2}), ones({2}), full({2}, 3.0), scalar(1.0),
                          from_vector({1, 2}, {2}), randn({2}, rng), uniform({2}, rng, 0, 1),
                          rand({2}, rng), eye(2), linspace(0, 1, 3), arange(1.5)})
    EXPECT_EQ(t.dtype(), Dtype::f32);
  EXPECT_EQ(nn::Linear(2, 3, true, rng).weight.dtype(), Dtype::f32);
  EXPECT_EQ(nn::LayerNorm(3, true).weight.dtype(), Dtype::f32);
  EXPECT_EQ(nn::Embedding(4, 3, rng).weight.dtype(), Dtype::f32);
  EXPECT_EQ(nn::QKVAttention(4, 4, 4, {}, true, rng).W_Q.dtype(), Dtype::f32);
  EXPECT_EQ(nn::GPTConfig{}.dtype, Dtype::f32);
  EXPECT_EQ(arange(3).dtype(), Dtype::i64);  // integers stay int64, as PyTorch's
  EXPECT_EQ(randint(0, 3, {2}, rng).dtype(), Dtype::i64);
}

// Linear -> relu -> Linear on randn input, every dtype left to the defaults.
void a_new_users_mlp(Dtype expected) {
  Rng rng(0);
  nn::Linear fc1(4, 8, true, rng), fc2(8, 2, true, rng);
  const Tensor x = randn({5, 4}, rng);
  const Tensor y = fc2(relu(fc1(x)));  // (5, 2)
  EXPECT_EQ(y.dtype(), expected);
  y.backward(ones_like(y));
  for (const Tensor& p : {fc1.weight, fc1.bias, fc2.weight, fc2.bias}) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), expected);
    for (double g : p.grad().to_vector()) EXPECT_TRUE(std::isfinite(g));
  }
}

TEST(DefaultDtype, ANewUsersMlpRunsForwardAndBackward) { a_new_users_mlp(Dtype::f32); }

TEST(DefaultDtype, SetToFloat64MakesFactoriesAndLayersDouble) {
  const DefaultDtypeScope f64(Dtype::f64);
  EXPECT_EQ(get_default_dtype(), Dtype::f64);
  Rng rng(0);
  for (const Tensor& t : {zeros({2}), randn({2}, rng), full({2}, 1.0), arange(0.5), eye(2),
                          linspace(0, 1, 2), rand({2}, rng)})
    EXPECT_EQ(t.dtype(), Dtype::f64);
  EXPECT_EQ(nn::Linear(2, 3, true, rng).bias.dtype(), Dtype::f64);
  EXPECT_EQ(nn::LayerNorm(3, true).bias.dtype(), Dtype::f64);
  EXPECT_EQ(nn::Embedding(4, 3, rng).weight.dtype(), Dtype::f64);
  EXPECT_EQ(nn::GPTConfig{}.dtype, Dtype::f64);
  a_new_users_mlp(Dtype::f64);
  // and in double the MLP's gradients check against finite differences
  nn::Linear fc1(3, 4, true, rng), fc2(4, 1, true, rng);
  const auto f = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{fc2(tanh(fc1(in[0])))};
  };
  EXPECT_TRUE(gradcheck(f, {randn({2, 3}, rng)}).passed);
}

TEST(DefaultDtype, IsProcessWideAsPyTorchs) {
  const DefaultDtypeScope f64(Dtype::f64);
  Dtype seen = Dtype::i64;
  std::thread([&] { seen = zeros({1}).dtype(); }).join();
  EXPECT_EQ(seen, Dtype::f64);
}

// ---- printing --------------------------------------------------------------------------------

Tensor floats(int64_t n, double (*f)(int64_t), const Shape& shape, Dtype dtype = Dtype::f32) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = f(i);
  return from_vector(v, shape, dtype);
}

TEST(Print, IsTorchsStr) {
  TG_REQUIRE_PYTHON("torch");
  struct Case {
    const char* torch;  // an expression, or statements that set t
    std::function<std::string()> ours;
  };
  const auto str = [](Tensor t) { return [t] { return t.str(); }; };
  const double inf = INFINITY, nan = NAN;
  const std::vector<Case> cases = {
      {"torch.arange(12).reshape(3, 4)", str(reshape(arange(12), {3, 4}))},
      {"torch.tensor([[-100, 2], [3, 40000]])", str(from_indices({-100, 2, 3, 40000}, {2, 2}))},
      {"torch.tensor([2**62, -5])", str(from_indices({int64_t{1} << 62, -5}, {2}))},
      {"torch.tensor([[1.5, -2.25, 3.0], [0.125, 4.0, -5.5]])",
       str(from_vector({1.5, -2.25, 3.0, 0.125, 4.0, -5.5}, {2, 3}))},
      {"torch.tensor([1., 2., 3.])", str(from_vector({1, 2, 3}, {3}))},
      {"torch.zeros(2, 3)", str(zeros({2, 3}))},
      {"torch.linspace(0, 1, 5, dtype=torch.float64)", str(linspace(0, 1, 5, Dtype::f64))},
      {"torch.tensor([1e-5, 1.0, 123456.0])", str(from_vector({1e-5, 1.0, 123456.0}, {3}))},
      {"torch.tensor([-1e10, 2.5, 0.0])", str(from_vector({-1e10, 2.5, 0.0}, {3}))},
      {"torch.tensor([float('inf'), float('-inf'), float('nan'), 1.5])",
       str(from_vector({inf, -inf, nan, 1.5}, {4}))},
      {"torch.tensor([float('inf'), -2.0, 0.0])", str(from_vector({inf, -2.0, 0.0}, {3}))},
      {"torch.tensor(3.5)", str(scalar(3.5))},
      {"torch.tensor(-7)", str(from_indices({-7}, {}))},
      {"(torch.arange(24.) / 4).reshape(2, 3, 4)",
       str(floats(24, [](int64_t i) { return i / 4.0; }, {2, 3, 4}))},
      {"torch.arange(16).reshape(2, 2, 2, 2)", str(reshape(arange(16), {2, 2, 2, 2}))},
      {"torch.arange(30.) / 3",
       str(floats(30, [](int64_t i) { return double(float(i) / 3.0f); }, {30}))},
      {"torch.arange(40000.).reshape(200, 200)", str(reshape(arange(40000.0), {200, 200}))},
      {"(torch.arange(40000.) % 997 + 1.5).reshape(200, 200)",
       str(floats(40000, [](int64_t i) { return i % 997 + 1.5; }, {200, 200}))},
      {"torch.arange(2000)", str(arange(2000))},
      {"torch.arange(2000, dtype=torch.float64) * 0.5 + 0.25",
       str(floats(
           2000, [](int64_t i) { return i * 0.5 + 0.25; }, {2000}, Dtype::f64))},
      {"(torch.arange(1200.) / 8).reshape(4, 3, 10, 10)",
       str(floats(1200, [](int64_t i) { return i / 8.0; }, {4, 3, 10, 10}))},
      {"torch.zeros(0)", str(zeros({0}))},
      {"torch.zeros(0, 3)", str(zeros({0, 3}))},
      {"torch.zeros(0, dtype=torch.int64)", str(zeros({0}, Dtype::i64))},
      {"torch.tensor([1.5, 2.0], requires_grad=True)",
       str(from_vector({1.5, 2.0}, {2}).set_requires_grad())},
      {"torch.set_default_dtype(torch.float64)\n"
       "t = (str(torch.tensor([1.5, 2.0])), str(torch.tensor([1.5, 2.0], dtype=torch.float32)))\n"
       "torch.set_default_dtype(torch.float32)",
       [] {
         const DefaultDtypeScope f64(Dtype::f64);
         std::string s = "(";
         s += from_vector({1.5, 2.0}, {2}).str();
         s += ", " + from_vector({1.5, 2.0}, {2}, Dtype::f32).str() + ")";
         return s;
       }},
  };
  std::string script = "import torch\n";
  for (const Case& c : cases) {
    const std::string e = c.torch;
    script += (e.find('\n') == std::string::npos ? "t = " + e : e) +
              "\nprint(str(t) if torch.is_tensor(t) else '(' + ', '.join(map(str, t)) + ')')\n"
              "print('@@')\n";
  }
  const std::vector<std::string> out = blocks(run_python(script));
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].torch);
    std::string want = out[i];
    for (size_t at; (at = want.find("torch.")) != std::string::npos;) want.erase(at, 6);
    EXPECT_EQ(cases[i].ours(), want);
  }
}

TEST(Print, SummarisesLargeTensorsAndStreams) {
  const Tensor big = reshape(arange(40000), {200, 200});
  const std::string s = big.str();
  EXPECT_LT(s.size(), 1000u);  // not 40000 numbers
  EXPECT_NE(s.find("..."), std::string::npos);
  std::ostringstream os;
  os << big << " " << big.shape();
  EXPECT_EQ(os.str(), s + " (200, 200)");
  // a result of an op names it
  Tensor x = from_vector({1, 2}, {2}).set_requires_grad();
  const Tensor y = relu(x);
  EXPECT_EQ(y.str(), "tensor([1., 2.], grad_fn=<" + y.op_name() + ">)");
  // precision
  EXPECT_EQ(from_vector({1.0 / 3}, {1}).str(2), "tensor([0.33])");
}

}  // namespace
}  // namespace tg
