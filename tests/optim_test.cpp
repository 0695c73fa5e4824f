// optim/ on its own:
//   state:      k steps, save, a new optimizer loads, more steps == an uninterrupted run, bit for
//               bit; load_state_dict's errors as a table, and the state survives a bad load
//   in place:   a step bumps the parameter's version, so a stale backward throws GraphError
//   options:    bad hyperparameters and parameter lists as a table
//   clipping and the schedule at their key points

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/error.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/sum_of_squares.h>
#include <tapegrad/ops/threads.h>
#include <tapegrad/optim/optim.h>
#include "optim_util.h"
#include "test_util.h"

namespace tg::optim {
namespace {

using test_util::leaves;
using test_util::make_problem;
using test_util::Problem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- state: save, load, continue ------------------------------------------------------------

// Updates from..to-1 of a nanoGPT loop on `params` (float64 gradients converted to their dtype).
void run_steps(Optimizer& opt, const Problem& pr, int64_t from, int64_t to) {
  const int64_t steps = static_cast<int64_t>(pr.grads.size());
  for (int64_t s = from; s < to; ++s) {
    opt.set_lr(get_lr(s, 1e-2, 1e-3, 2, steps));
    for (std::size_t i = 0; i < opt.params().size(); ++i)
      opt.params()[i].second.set_grad(pr.grads[s][i].to(opt.params()[i].second.dtype()));
    clip_grad_norm(opt.params(), 1.0);
    opt.step();
  }
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const NamedTensors&)>;

TEST(OptimState, ResumedRunEqualsUninterruptedRunBitForBit) {
  const std::vector<std::pair<std::string, MakeOptimizer>> makers = {
      {"adamw", [](const NamedTensors& p) { return std::make_unique<AdamW>(p, 1e-2); }},
      {"sgd", [](const NamedTensors& p) { return std::make_unique<SGD>(p, 0.1, 0.9, 0.1); }}};
  const Problem pr = make_problem(8, 7);
  for (const auto& [name, make] : makers) {
    for (const Dtype dtype : {Dtype::f64, Dtype::f32}) {
      SCOPED_TRACE(name + " " + dtype_name(dtype));
      const auto whole = make(leaves(pr.params, dtype));
      run_steps(*whole, pr, 0, 8);

      const auto first = make(leaves(pr.params, dtype));
      run_steps(*first, pr, 0, 3);
      const NamedTensors saved_state = first->state_dict();
      const auto resumed = make(leaves(first->params(), dtype));  // as from a checkpoint
      const auto fresh = make(leaves(first->params(), dtype));    // the negative control
      resumed->load_state_dict(saved_state);
      EXPECT_EQ(resumed->step_count(), 3);
      run_steps(*resumed, pr, 3, 8);
      run_steps(*fresh, pr, 3, 8);

      const NamedTensors a = whole->state_dict(), b = resumed->state_dict();
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t k = 0; k < a.size(); ++k) {
        EXPECT_EQ(a[k].first, b[k].first);
        EXPECT_EQ(a[k].second.to_vector(), b[k].second.to_vector()) << a[k].first;
      }
      for (std::size_t i = 0; i < pr.params.size(); ++i) {
        const std::vector<double> w = whole->params()[i].second.to_vector();
        EXPECT_EQ(w, resumed->params()[i].second.to_vector()) << pr.params[i].first;
        EXPECT_NE(w, fresh->params()[i].second.to_vector()) << pr.params[i].first;
      }
    }
  }
}

TEST(OptimState, NamesAndShapes) {
  const Problem pr = make_problem(1, 3);
  const AdamW adamw(leaves(pr.params, Dtype::f32));
  const NamedTensors s = adamw.state_dict();
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s[0].first, "optim.step");
  EXPECT_EQ(s[0].second.rank(), 0);
  EXPECT_EQ(s[0].second.item(), 0.0);
  EXPECT_EQ(s[1].first, "optim.m.h.0.w");
  EXPECT_EQ(s[8].first, "optim.v.ln.g");
  EXPECT_EQ(s[3].second.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s[3].second.dtype(), Dtype::f32);
  EXPECT_EQ(SGD(leaves(pr.params, Dtype::f64), 0.1).state_dict().size(), 1u);
  const NamedTensors m = SGD(leaves(pr.params, Dtype::f64), 0.1, 0.9).state_dict();
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[2].first, "optim.momentum.h.0.b");
}

struct LoadCase {
  std::string name;
  std::function<void(NamedTensors&)> edit;  // breaks a good state dict
  std::vector<std::string> fragments;       // each must appear in the ValueError
};

Tensor& entry(NamedTensors& s, const std::string& name) {
  for (auto& [n, t] : s)
    if (n == name) return t;
  throw std::logic_error("no entry " + name);
}

void remove_entry(NamedTensors& s, const std::string& name) {
  std::erase_if(s, [&](const auto& e) { return e.first == name; });
}

TEST(OptimState, LoadRejectsBadStateAndKeepsItsOwn) {
  const std::vector<LoadCase> cases = {
      {"missing step", [](NamedTensors& s) { remove_entry(s, "optim.step"); },
       {"'optim.step'", "missing"}},
      {"missing moment", [](NamedTensors& s) { remove_entry(s, "optim.m.h.0.w"); },
       {"'optim.m.h.0.w'", "missing"}},
      {"unexpected entry", [](NamedTensors& s) { s.emplace_back("optim.m.lm_head", zeros({2})); },
       {"unexpected", "'optim.m.lm_head'"}},
      {"unprintable name", [](NamedTensors& s) { s.emplace_back("optim.m.\n\x01", zeros({2})); },
       {"unexpected", "'optim.m.\\x0a\\x01'"}},
      {"SGD's state", [](NamedTensors& s) { s.emplace_back("optim.momentum.h.0.b", zeros({3})); },
       {"unexpected", "'optim.momentum.h.0.b'"}},
      {"misshapen", [](NamedTensors& s) { entry(s, "optim.v.h.0.b") = zeros({4}); },
       {"'optim.v.h.0.b'", "(4,)", "(3,)"}},
      {"transposed", [](NamedTensors& s) { entry(s, "optim.m.h.0.w") = zeros({3, 4}); },
       {"'optim.m.h.0.w'", "(3, 4)"}},
      {"int64 moment", [](NamedTensors& s) {
         entry(s, "optim.m.h.0.b") = from_indices({1, 2, 3}, {3}); }, {"'optim.m.h.0.b'", "int64"}},
      {"undefined", [](NamedTensors& s) { entry(s, "optim.v.wpe") = Tensor(); },
       {"'optim.v.wpe'", "undefined"}},
      {"given twice", [](NamedTensors& s) { s.push_back(s[1]); }, {"'optim.m.h.0.w'", "twice"}},
      {"negative step", [](NamedTensors& s) { entry(s, "optim.step") = scalar(-1); },
       {"'optim.step'", "count"}},
      {"fractional step", [](NamedTensors& s) { entry(s, "optim.step") = scalar(2.5); },
       {"'optim.step'", "count"}},
      {"NaN step", [](NamedTensors& s) { entry(s, "optim.step") = scalar(kNaN); },
       {"'optim.step'"}},
      {"step of rank 1", [](NamedTensors& s) { entry(s, "optim.step") = zeros({1}); },
       {"'optim.step'", "rank 0"}},
  };
  const Problem pr = make_problem(2, 11);
  AdamW opt(leaves(pr.params, Dtype::f64), 1e-2);
  run_steps(opt, pr, 0, 2);
  const NamedTensors good = opt.state_dict();
  for (const LoadCase& c : cases) {
    SCOPED_TRACE(c.name);
    NamedTensors bad = good;
    c.edit(bad);
    try {
      opt.load_state_dict(bad);
      ADD_FAILURE() << "no error";
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with("AdamW: ")) << what;
      for (const std::string& f : c.fragments)
        EXPECT_NE(what.find(f), std::string::npos) << "expected '" << f << "' in: " << what;
    }
    const NamedTensors now = opt.state_dict();
    for (std::size_t k = 0; k < good.size(); ++k)
      EXPECT_EQ(now[k].second.to_vector(), good[k].second.to_vector()) << good[k].first;
  }
  NamedTensors int_step = good;  // an int64 count and float32 moments load (converted)
  entry(int_step, "optim.step") = from_indices({5}, {});
  entry(int_step, "optim.m.wpe") = good[3].second.to(Dtype::f32);
  opt.load_state_dict(int_step);
  EXPECT_EQ(opt.step_count(), 5);
  EXPECT_EQ(opt.state_dict()[3].second.dtype(), Dtype::f64);
}


// ---- steps in place -------------------------------------------------------------------------

// W is saved by matmul; the step writes W in place; the backward that needs the old W refuses.
TEST(OptimStep, BumpsTheVersionSoAStaleBackwardThrows) {
  Rng rng(5);
  Tensor W = randn({3, 3}, rng).set_requires_grad();
  const Tensor x = randn({2, 3}, rng);
  const Tensor L = sum_of_squares(matmul(x, W));
  L.backward(Tensor(), /*retain_graph=*/true);
  const uint64_t before = W.version();
  AdamW opt({{"W", W}}, 1e-2);
  opt.step();
  EXPECT_GT(W.version(), before);
  EXPECT_THROW(L.backward(), GraphError);
}

// zero_grad() drops the gradients, as torch's default set_to_none=True; zero_grad(false) zeroes
// them in place, keeping the buffer (a handle to it sees the zeros).
TEST(OptimStep, SkipsParametersWithoutGradientAndZeroGradDropsOrZeroes) {
  const Problem pr = make_problem(1, 9);
  for (const bool adamw : {true, false}) {
    SCOPED_TRACE(adamw ? "AdamW" : "SGD");
    const NamedTensors params = leaves(pr.params, Dtype::f64);
    std::unique_ptr<Optimizer> opt;
    if (adamw) opt = std::make_unique<AdamW>(params, 0.1);
    else opt = std::make_unique<SGD>(params, 0.1, 0.9, 0.1);
    params[0].second.set_grad(pr.grads[0][0].clone());
    opt->step();
    EXPECT_NE(params[0].second.to_vector(), pr.params[0].second.to_vector());
    for (std::size_t i = 1; i < params.size(); ++i)
      EXPECT_EQ(params[i].second.to_vector(), pr.params[i].second.to_vector());
    const Tensor held = params[0].second.grad();
    opt->zero_grad(false);
    ASSERT_TRUE(params[0].second.grad().defined());
    for (const double g : held.to_vector()) EXPECT_EQ(g, 0.0);
    EXPECT_FALSE(params[1].second.grad().defined());
    // Dropped: the next step skips every parameter, as none has a gradient.
    opt->zero_grad();
    EXPECT_FALSE(params[0].second.grad().defined());
    const std::vector<double> before = params[0].second.to_vector();
    opt->step();
    EXPECT_EQ(params[0].second.to_vector(), before);
  }
}

// A module's zero_grad drops its parameters' gradients (torch's default) or zeroes them in place.
TEST(OptimStep, ModuleZeroGradDropsOrZeroes) {
  Rng rng(3);
  nn::Linear layer(3, 2, true, rng);
  sum(layer.forward(ones({4, 3}))).backward();
  const Tensor w_grad = layer.weight.grad();
  ASSERT_TRUE(w_grad.defined());
  layer.zero_grad(false);
  for (const double g : w_grad.to_vector()) EXPECT_EQ(g, 0.0);
  EXPECT_TRUE(layer.weight.grad().defined());
  layer.zero_grad();
  EXPECT_FALSE(layer.weight.grad().defined());
  EXPECT_FALSE(layer.bias.grad().defined());
}

// One update by hand: the formulas of the headers, for a rank-2 parameter (decays) and a
// rank-1 one (does not).
TEST(OptimStep, FirstUpdatesFollowTheFormulas) {
  Tensor w = from_vector({1.0, -2.0}, {1, 2}).set_requires_grad();
  Tensor b = from_vector({0.5}, {1}).set_requires_grad();
  AdamW adamw({{"w", w}, {"b", b}}, 0.1, {0.9, 0.999}, 1e-8, 0.5);
  w.set_grad(from_vector({0.2, 0.0}, {1, 2}));
  b.set_grad(from_vector({-3.0}, {1}));
  adamw.step();  // t = 1: m_hat = g, v_hat = g^2, so the step is lr g / (|g| + eps)
  EXPECT_NEAR(w.at({0, 0}), 1.0 * (1 - 0.1 * 0.5) - 0.1 * 0.2 / (0.2 + 1e-8), 1e-15);
  EXPECT_DOUBLE_EQ(w.at({0, 1}), -2.0 * (1 - 0.1 * 0.5));
  EXPECT_NEAR(b.item(), 0.5 + 0.1 * 3.0 / (3.0 + 1e-8), 1e-15);

  Tensor p = from_vector({1.0, 2.0}, {2, 1}).set_requires_grad();
  SGD sgd({{"p", p}}, 0.1, 0.9, 0.01);
  p.set_grad(from_vector({1.0, -1.0}, {2, 1}));
  sgd.step();  // buf = g + wd p
  sgd.step();  // buf = 0.9 buf + g + wd p
  const double buf1 = 1.0 + 0.01 * 1.0, p1 = 1.0 - 0.1 * buf1;
  const double buf2 = 0.9 * buf1 + 1.0 + 0.01 * p1;
  EXPECT_NEAR(p.at({0, 0}), p1 - 0.1 * buf2, 1e-15);
}

// ---- options ---------------------------------------------------------------------------------

struct BadOption {
  std::string name;
  std::function<void()> make;
  std::vector<std::string> fragments;
};

TEST(OptimOptions, BadValuesThrowValueErrorNamingThem) {
  Rng rng(1);
  const Tensor x = randn({2}, rng).set_requires_grad();
  const NamedTensors ok = {{"x", x}};
  const std::vector<BadOption> cases = {
      {"negative lr", [&] { AdamW(ok, -1.0); }, {"AdamW: ", "lr", "-1"}},
      {"NaN lr", [&] { SGD(ok, kNaN); }, {"SGD: ", "lr"}},
      {"infinite lr", [&] { AdamW(ok, kInf); }, {"AdamW: ", "lr"}},
      {"beta1 = 1", [&] { AdamW(ok, 1e-3, {1.0, 0.999}); }, {"beta1", "[0, 1)"}},
      {"beta2 < 0", [&] { AdamW(ok, 1e-3, {0.9, -0.1}); }, {"beta2", "-0.1"}},
      {"negative eps", [&] { AdamW(ok, 1e-3, {0.9, 0.999}, -1e-8); }, {"eps"}},
      {"negative decay", [&] { AdamW(ok, 1e-3, {0.9, 0.999}, 1e-8, -0.1); }, {"weight_decay"}},
      {"decay_rank_min < 0", [&] { AdamW(ok, AdamWOptions{.decay_rank_min = -1}); },
       {"decay_rank_min"}},
      {"negative momentum", [&] { SGD(ok, 0.1, -0.9); }, {"SGD: ", "momentum"}},
      {"SGD negative decay", [&] { SGD(ok, 0.1, 0.0, -1.0); }, {"SGD: ", "weight_decay"}},
      {"set_lr(-1)", [&] { SGD(ok, 0.1).set_lr(-1); }, {"SGD: ", "lr"}},
      {"non-leaf", [&] { AdamW({{"y", mul(x, x)}}); }, {"'y'", "not a leaf", "mul"}},
      {"int64", [&] { SGD({{"i", from_indices({1}, {1})}}, 0.1); }, {"'i'", "int64"}},
      {"undefined", [&] { SGD({{"u", Tensor()}}, 0.1); }, {"'u'", "undefined"}},
      {"same name twice", [&] { SGD({{"x", x}, {"x", x.detach().clone()}}, 0.1); },
       {"'x'", "twice"}},
      {"same tensor twice", [&] { SGD({{"x", x}, {"tied", x}}, 0.1); },
       {"'tied'", "shares its buffer"}},
      {"a view of a parameter", [&] { SGD({{"x", x}, {"alias", x.detach()}}, 0.1); },
       {"'alias'", "shares its buffer"}},
      {"clip at -1", [&] { clip_grad_norm(ok, -1.0); }, {"clip_grad_norm", "max_norm"}},
      {"get_lr it < 0", [&] { get_lr(-1, 1e-3, 1e-4, 0, 10); }, {"get_lr", "it = -1"}},
      {"get_lr steps 0", [&] { get_lr(0, 1e-3, 1e-4, 0, 0); }, {"get_lr", "steps = 0"}},
      {"get_lr warmup < 0", [&] { get_lr(0, 1e-3, 1e-4, -2, 10); }, {"warmup = -2"}},
      {"get_lr NaN lr_min", [&] { LrSchedule{1e-3, kNaN, 0, 10}(0); }, {"lr_min = nan"}},
  };
  for (const BadOption& c : cases) {
    SCOPED_TRACE(c.name);
    test::expect_throws<ValueError>(c.make, c.fragments);
  }
}

// ---- clipping ---------------------------------------------------------------------------------

TEST(ClipGradNorm, ReturnsTheNormAndScalesOnlyAboveMaxNorm) {
  for (const Dtype dtype : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor a = zeros({2, 2}, dtype).set_requires_grad(), b = zeros({1}, dtype).set_requires_grad();
    const Tensor none = zeros({3}, dtype).set_requires_grad();  // no gradient: left out
    const NamedTensors params = {{"a", a}, {"none", none}, {"b", b}};
    EXPECT_EQ(clip_grad_norm(params, 1.0), 0.0);  // no gradients yet
    a.set_grad(from_vector({3, 0, 0, 4}, {2, 2}, dtype));
    b.set_grad(from_vector({12}, {1}, dtype));  // total sqrt(9 + 16 + 144) = 13
    EXPECT_EQ(clip_grad_norm(params, 20.0), 13.0);
    EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{3, 0, 0, 4}));  // untouched
    EXPECT_EQ(clip_grad_norm(params, 13.0), 13.0);  // not above: untouched
    EXPECT_EQ(b.grad().item(), 12.0);
    EXPECT_EQ(clip_grad_norm(params, 1.0), 13.0);
    const double coef = 1.0 / (13.0 + 1e-6), tol = dtype == Dtype::f32 ? 1e-7 : 1e-16;
    EXPECT_NEAR(a.grad().at({1, 1}), 4 * coef, tol);
    EXPECT_NEAR(b.grad().item(), 12 * coef, tol);
    EXPECT_NEAR(grad_norm(params), 13 * coef, 1e-6);
    EXPECT_FALSE(none.grad().defined());
  }
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedAndNothingScaled) {
  for (const double bad : {kNaN, kInf}) {
    Tensor a = zeros({2}).set_requires_grad(), b = zeros({2}).set_requires_grad();
    a.set_grad(from_vector({bad, 1.0}, {2}));
    b.set_grad(from_vector({100.0, 200.0}, {2}));
    const double total = clip_grad_norm({{"a", a}, {"b", b}}, 1.0);
    EXPECT_EQ(std::isnan(total), std::isnan(bad));
    EXPECT_FALSE(std::isfinite(total));
    EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{100.0, 200.0}));
  }
}

// Gradients long enough for the norm's 2^15-entry blocks (the last one short) and for more than
// one group of 64 blocks, at one thread and two: small integers, so every sum is exact and the
// norm is sqrt of a known integer; every entry, the first and last blocks' too, is scaled.
TEST(ClipGradNorm, LongGradientsByBlocksAtAnyThreadCount) {
  for (const int threads : {1, 2}) {
    const tg::test::ThreadCount team(threads);
    // 3 blocks and a short one; 67 blocks and a short one (more than one group of 64)
    for (const int64_t n : {3 * (int64_t{1} << 15) + 1001, 67 * (int64_t{1} << 15) + 1001}) {
      for (const Dtype dtype : {Dtype::f64, Dtype::f32}) {
        SCOPED_TRACE(std::to_string(threads) + " thread(s), " + dtype_name(dtype) + ", " +
                     std::to_string(n) + " entries");
        std::vector<double> values(static_cast<std::size_t>(n));
        double exact = 0;
        for (int64_t i = 0; i < n; ++i) {
          values[i] = static_cast<double>(i % 7) - 3;
          exact += values[i] * values[i];
        }
        Tensor a = zeros({n}, dtype).set_requires_grad();
        Tensor b = zeros({1}, dtype).set_requires_grad();
        a.set_grad(from_vector(values, {n}, dtype));
        b.set_grad(from_vector({5.0}, {1}, dtype));
        const NamedTensors params = {{"a", a}, {"b", b}};
        EXPECT_EQ(grad_norm(params), std::sqrt(exact + 25));
        EXPECT_EQ(clip_grad_norm(params, 1.0), std::sqrt(exact + 25));
        const double coef = 1.0 / (std::sqrt(exact + 25) + 1e-6);
        const std::vector<double> scaled = a.grad().to_vector();
        const double tol = dtype == Dtype::f32 ? 1e-7 : 1e-16;
        for (const int64_t i : {int64_t{0}, int64_t{1} << 15, n - 1000, n - 1})
          EXPECT_NEAR(scaled[i], values[i] * coef, tol) << "entry " << i;
        double sum_sq = 0;
        for (const double v : scaled) sum_sq += v * v;
        EXPECT_NEAR(std::sqrt(sum_sq + 25 * coef * coef), 1.0, 1e-6);
      }
    }
  }
}

// A gradient sharing its buffer with another tensor (as a view's gradient can share the
// gradient of its base) is replaced by a scaled copy, not written through.
TEST(ClipGradNorm, LeavesSharedBuffersAlone) {
  Tensor a = zeros({2}).set_requires_grad();
  const Tensor other = from_vector({30.0, 40.0}, {2});
  a.set_grad(other.detach());  // the same buffer
  EXPECT_EQ(clip_grad_norm({{"a", a}}, 5.0), 50.0);
  EXPECT_EQ(other.to_vector(), (std::vector<double>{30.0, 40.0}));
  EXPECT_NEAR(a.grad().at({1}), 40 * 5.0 / (50.0 + 1e-6), 1e-15);
}

// ---- the schedule -----------------------------------------------------------------------------

TEST(LrSchedule, KeyPoints) {
  const LrSchedule s{6e-4, 6e-5, 10, 51};  // decay over updates 10 .. 50
  EXPECT_DOUBLE_EQ(s(0), 6e-4 / 11);
  EXPECT_DOUBLE_EQ(s(9), 6e-4 * 10 / 11);    // the last warmup update
  EXPECT_DOUBLE_EQ(s(10), 6e-4);             // warmup ends: the full rate
  EXPECT_DOUBLE_EQ(s(30), (6e-4 + 6e-5) / 2);  // halfway through the cosine
  EXPECT_EQ(s(50), 6e-5);                    // the last update: exactly lr_min
  EXPECT_EQ(s(80), 6e-5);                    // past the end
  for (int64_t it = 11; it <= 50; ++it) EXPECT_LT(s(it), s(it - 1)) << it;

  for (int64_t it = 0; it < 20; ++it) EXPECT_EQ(get_lr(it, 1e-3, 1e-3, 0, 20), 1e-3) << it;
  EXPECT_EQ(get_lr(0, 1e-3, 1e-4, 0, 1), 1e-4);  // one update: it is the last
  // No decay span (steps - 1 - warmup <= 0): warmup, then lr_min.
  EXPECT_DOUBLE_EQ(get_lr(4, 1e-2, 1e-3, 5, 6), 1e-2 * 5 / 6);
  EXPECT_EQ(get_lr(5, 1e-2, 1e-3, 5, 6), 1e-3);
  EXPECT_DOUBLE_EQ(get_lr(2, 1e-2, 1e-3, 5, 3), 1e-2 * 3 / 6);
  EXPECT_EQ(get_lr(7, 1e-2, 1e-3, 5, 3), 1e-3);
}

}  // namespace
}  // namespace tg::optim
