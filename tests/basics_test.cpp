// The basics a PyTorch user reaches for first: the factories (arange, linspace, eye, full, rand,
// randint) value for value against PyTorch, and their errors; the default dtype (float32,
// settable, process-wide; a new user's MLP runs on defaults). nn::init is init_test's, printing
// print_test's. These suites keep the library's own default dtype (no default_f64.cpp).

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/ops.h>

#include "test_util.h"
#include "torch_util.h"

namespace tg {
namespace {

using test::blocks;
using test::DefaultDtypeScope;
using test::expect_throws;
using test::numbers;
using test::run_python;

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

// Rng::uniform makes its numbers itself (one engine draw each, no long-double logarithms), but
// they must stay the ones std::uniform_real_distribution made on the same engine: every seeded
// run, checkpoint and recipe figure was made with those. Bit for bit, over many draws.
TEST(Factories, RngUniformIsTheStandardDistributionsStream) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{7}, uint64_t{20261205}}) {
    Rng rng(seed);
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<double> standard(0.0, 1.0);
    int64_t differ = 0;
    for (int i = 0; i < 200000; ++i) differ += rng.uniform(0.0, 1.0) != standard(engine);
    EXPECT_EQ(differ, 0) << "seed " << seed;
    EXPECT_EQ(rng.engine(), engine) << "seed " << seed << ": one engine draw per number";
  }
  // Draws random streams hardly reach: 0, the boundaries of doubles' rounding and the draws that
  // round up to 2^64 (taken as the largest double below 1), against generate_canonical itself
  // on an engine that returns the draw.
  struct Fixed {
    using result_type [[maybe_unused]] = uint64_t;  // a URBG's, though libstdc++ reads none
    uint64_t v;
    static constexpr uint64_t min() { return 0; }
    static constexpr uint64_t max() { return UINT64_MAX; }
    uint64_t operator()() { return v; }
  };
  for (const uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 53, (uint64_t{1} << 53) + 1,
                           UINT64_MAX - 2048, UINT64_MAX - 1025, UINT64_MAX - 1024,
                           UINT64_MAX - 1, UINT64_MAX}) {
    Fixed engine{v};
    EXPECT_EQ(Rng::unit(v), (std::generate_canonical<double, 53>(engine))) << "draw " << v;
  }
  EXPECT_LT(Rng::unit(UINT64_MAX), 1.0);
  // Negative control: a stream one draw behind differs almost everywhere.
  Rng rng(7);
  std::mt19937_64 engine(7);
  engine.discard(1);
  std::uniform_real_distribution<double> standard(0.0, 1.0);
  int64_t differ = 0;
  for (int i = 0; i < 1000; ++i) differ += rng.uniform(0.0, 1.0) != standard(engine);
  EXPECT_GT(differ, 990);
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

}  // namespace
}  // namespace tg
