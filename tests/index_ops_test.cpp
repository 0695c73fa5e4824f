// cross_entropy, embedding, narrow / split / cat and dropout: values against plain loops and
// hand-derived numbers, kernels against formulas, dropout's statistics. Bad input is in
// index_ops_bad_input_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/ops/dropout.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;

// Gradients of sum(f(x) * W) for fixed random W, through kernels (no graph) and through
// formulas (create_graph); each input is a fresh leaf.
struct BothGrads {
  std::vector<Tensor> kernel, formula;
};

BothGrads grads_both(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                     const std::vector<Tensor>& inputs, uint64_t seed) {
  BothGrads r;
  for (bool create_graph : {false, true}) {
    std::vector<Tensor> x;
    for (const Tensor& t : inputs) x.push_back(t.detach().clone().set_requires_grad());
    const Tensor y = f(x);
    tg::Rng rng(seed);
    const Tensor w = tg::randn(y.shape(), rng);
    (create_graph ? r.formula : r.kernel) = tg::grad({y}, x, {w}, create_graph);
  }
  return r;
}

void expect_close(const Tensor& a, const Tensor& b, double rel) {
  ASSERT_EQ(a.shape(), b.shape());
  const auto va = a.to_vector(), vb = b.to_vector();
  double scale = 1e-300;
  for (double v : vb) scale = std::max(scale, std::fabs(v));
  for (std::size_t k = 0; k < va.size(); ++k)
    EXPECT_LE(std::fabs(va[k] - vb[k]), rel * scale)
        << "at " << k << ": " << va[k] << " vs " << vb[k];
}

void expect_kernel_matches_formula(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                   const std::vector<Tensor>& inputs) {
  const BothGrads g = grads_both(f, inputs, 5);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    expect_close(g.kernel[i], g.formula[i], 1e-12);
  }
}

// -log softmax(x)[n, t_n] averaged over the targets that count, by plain loops.
double cross_entropy_loop(const Tensor& x, const std::vector<int64_t>& t, int64_t ignore) {
  const int64_t N = x.size(0), V = x.size(1);
  double total = 0;
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (t[n] == ignore) continue;
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(x.at({n, v}));
    total += std::log(s) - x.at({n, t[n]});
    ++count;
  }
  return total / double(count);
}

TEST(CrossEntropy, MatchesPlainLoop) {
  tg::Rng rng(1);
  const Tensor x = tg::randn({6, 5}, rng, tg::Dtype::f64, 2.0);
  const std::vector<int64_t> t = {4, -1, 0, 2, -1, 4};
  const double ref = cross_entropy_loop(x, t, -1);
  EXPECT_NEAR(tg::cross_entropy(x, tg::from_indices(t, {6}), -1).item(), ref,
              1e-12 * std::fabs(ref));
  const Tensor y32 = tg::cross_entropy(x.to(tg::Dtype::f32), tg::from_indices(t, {6}), -1);
  EXPECT_EQ(y32.dtype(), tg::Dtype::f32);
  EXPECT_NEAR(y32.item(), ref, 1e-5 * std::fabs(ref));
}

// Past kPassParallelFrom entries (640 x 70) the rows' log-sum-exps and the kernel's gradient rows
// are shared by the team: the same bits from one thread and two, the loss as the plain loops',
// the kernel's gradient as the formula's, and an ignored row's gradient exactly 0.
TEST(CrossEntropy, RowsSharedByTheTeamGiveTheSameBits) {
  constexpr int64_t N = 640, V = 70;
  tg::Rng rng(5);
  const Tensor x64 = tg::randn({N, V}, rng, tg::Dtype::f64, 2.0);
  std::vector<int64_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = n % 7 == 3 ? -1 : (n * 31 + 5) % V;
  const Tensor targets = tg::from_indices(t, {N});
  const Tensor x = x64.to(tg::Dtype::f32).set_requires_grad();
  const auto run = [&](int threads, bool create_graph) {
    tg::test::ThreadCount team(threads);
    // A buffer of dX's size left in the allocator's cache full of 3s, so that a row the kernel
    // does not write shows (this thread's cache hands that block to dX: nothing else of its
    // size is made in between).
    (void)tg::full({N, V}, 3.0, tg::Dtype::f32);
    const Tensor y = tg::cross_entropy(x, targets, -1);
    return std::pair{y, tg::grad({y}, {x}, {tg::scalar(0.7, tg::Dtype::f32)}, create_graph)[0]};
  };
  const auto [y1, dx1] = run(1, false);
  const auto [y2, dx2] = run(2, false);
  EXPECT_EQ(y1.item(), y2.item());
  EXPECT_EQ(dx1.to_vector(), dx2.to_vector());
  const double ref = cross_entropy_loop(x64, t, -1);
  EXPECT_NEAR(y2.item(), ref, 1e-5 * std::fabs(ref));
  expect_close(dx2, run(2, true).second.detach(), 1e-5);
  for (int64_t n = 3; n < N; n += 7)
    for (int64_t v = 0; v < V; ++v) ASSERT_EQ(dx2.at({n, v}), 0.0) << "row " << n;
}

TEST(CrossEntropy, HandDerivedValues) {
  // Equal logits: every class has probability 1/V, so the loss is log V.
  EXPECT_NEAR(tg::cross_entropy(tg::zeros({2, 4}), tg::from_indices({1, 3}, {2})).item(),
              std::log(4.0), 1e-15);
  // Row [0, log 3]: softmax [1/4, 3/4], the loss of target 1 is log(4/3); the ignored row adds
  // nothing and does not count in the mean.
  const Tensor x = tg::from_vector({0, std::log(3.0), 5, 7}, {2, 2});
  EXPECT_NEAR(tg::cross_entropy(x, tg::from_indices({1, -1}, {2}), -1).item(),
              std::log(4.0 / 3.0), 1e-15);
  // A custom ignore_index: target 0 is ignored, so only row 1 (target 1: log(1 + e^-2)) counts.
  EXPECT_NEAR(tg::cross_entropy(x, tg::from_indices({0, 1}, {2}), 0).item(),
              std::log(1 + std::exp(-2.0)), 1e-15);
  // The same row twice averages to the same loss.
  EXPECT_NEAR(tg::cross_entropy(tg::from_vector({0, std::log(3.0), 0, std::log(3.0)}, {2, 2}),
                                tg::from_indices({1, 1}, {2}))
                  .item(),
              std::log(4.0 / 3.0), 1e-15);
}

TEST(CrossEntropy, AllIgnoredIsNanWithZeroGradient) {
  // As PyTorch: the mean over no targets is 0 / 0, and no target picks an entry to differentiate.
  for (bool create_graph : {false, true}) {
    const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
    const Tensor y = tg::cross_entropy(x, tg::from_indices({-1, -1}, {2}), -1);
    EXPECT_TRUE(std::isnan(y.item()));
    const Tensor dx = tg::grad({y}, {x}, {tg::scalar(0.5)}, create_graph)[0];
    for (double v : dx.to_vector()) EXPECT_EQ(v, 0.0);
  }
}

// Every kept target of weight 0 with label smoothing: the smoothing part is finite but the
// mean divides by the targets' weights, 0: NaN, as PyTorch 1.13 (not inf).
TEST(CrossEntropy, ZeroWeightOfEveryKeptTargetIsNanAlsoWithSmoothing) {
  const Tensor x = tg::from_vector({0.3, 0.7, 0.1, 0.2}, {2, 2}, tg::Dtype::f64);
  const Tensor w = tg::from_vector({0.0, 1.0}, {2}, tg::Dtype::f64);
  const Tensor y = tg::cross_entropy(x, tg::from_indices({0, 0}, {2}),
                                     {.weight = w, .label_smoothing = 0.2});
  EXPECT_TRUE(std::isnan(y.item())) << y.item();
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHotOverCount) {
  tg::Rng rng(2);
  const Tensor x = tg::randn({5, 4}, rng);
  const std::vector<int64_t> t = {3, -1, 0, 0, -1};
  const Tensor tt = tg::from_indices(t, {5});
  const double dy = 0.37;
  const int64_t count = 3;
  std::vector<double> ref(20, 0.0);
  for (int64_t n = 0; n < 5; ++n) {
    if (t[n] < 0) continue;
    double s = 0;
    for (int64_t v = 0; v < 4; ++v) s += std::exp(x.at({n, v}));
    for (int64_t v = 0; v < 4; ++v)
      ref[n * 4 + v] = dy * (std::exp(x.at({n, v})) / s - (v == t[n])) / double(count);
  }
  for (bool create_graph : {false, true}) {
    SCOPED_TRACE(create_graph ? "formula" : "kernel");
    const Tensor xl = x.detach().clone().set_requires_grad();
    const Tensor y = tg::cross_entropy(xl, tt, -1);
    const Tensor dx = tg::grad({y}, {xl}, {tg::scalar(dy)}, create_graph)[0];
    expect_close(dx, tg::from_vector(ref, {5, 4}), 1e-13);
  }
}

TEST(CrossEntropy, KernelMatchesFormula) {
  tg::Rng rng(3);
  const Tensor tt = tg::from_indices({0, 6, -1, 10, 3, 3, -1, 9}, {8});
  auto f = [tt](const std::vector<Tensor>& x) { return tg::cross_entropy(x[0], tt, -1); };
  expect_kernel_matches_formula(f, {tg::randn({8, 11}, rng)});
  expect_kernel_matches_formula(f, {tg::randn({8, 11}, rng, tg::Dtype::f64, 30.0)});
}

TEST(Embedding, PicksRows) {
  const Tensor W = tg::from_vector({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor Y = tg::embedding(tg::from_indices({2, 0, 2, 1}, {2, 2}), W);
  ASSERT_EQ(Y.shape(), tg::Shape({2, 2, 2}));
  EXPECT_EQ(Y.to_vector(), (std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11}));
  EXPECT_EQ(tg::embedding(tg::from_indices({1}, {}), W).to_vector(), (std::vector<double>{10, 11}));
}

TEST(Embedding, RepeatedIndicesAddTheirRows) {
  tg::Rng rng(4);
  const Tensor idx = tg::from_indices({1, 3, 1, 1}, {4});
  const Tensor G = tg::randn({4, 3}, rng);  // dY
  for (bool create_graph : {false, true}) {
    SCOPED_TRACE(create_graph ? "formula" : "kernel");
    const Tensor W = tg::randn({4, 3}, rng).set_requires_grad();
    const Tensor dW = tg::grad({tg::embedding(idx, W)}, {W}, {G}, create_graph)[0];
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(dW.at({0, c}), 0.0);
      EXPECT_NEAR(dW.at({1, c}), G.at({0, c}) + G.at({2, c}) + G.at({3, c}), 1e-15);
      EXPECT_EQ(dW.at({2, c}), 0.0);
      EXPECT_EQ(dW.at({3, c}), G.at({1, c}));
    }
  }
}

TEST(Embedding, SecondDerivativeIsEmbeddingAgain) {
  // d/dG of sum(dW * U), dW = index_add(G): row k of the result is U[idx[k]].
  tg::Rng rng(5);
  const Tensor idx = tg::from_indices({2, 0, 2}, {3});
  const Tensor W = tg::randn({3, 2}, rng).set_requires_grad();
  const Tensor G = tg::randn({3, 2}, rng).set_requires_grad();
  const Tensor U = tg::randn({3, 2}, rng);
  const Tensor dW = tg::grad({tg::embedding(idx, W)}, {W}, {G}, true)[0];
  const Tensor dG = tg::grad({dW}, {G}, {U})[0];
  expect_close(dG, tg::embedding(idx, U), 0.0);
}

TEST(NarrowSplitCat, SplitThenCatRoundTrips) {
  tg::Rng rng(6);
  const Tensor x = tg::randn({2, 7, 3}, rng);
  const std::vector<Tensor> pieces = tg::split(x, 3, 1);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].shape(), tg::Shape({2, 3, 3}));
  EXPECT_EQ(pieces[2].shape(), tg::Shape({2, 1, 3}));
  EXPECT_EQ(pieces[1].at({1, 2, 0}), x.at({1, 5, 0}));
  EXPECT_EQ(tg::cat(pieces, 1).to_vector(), x.to_vector());
  EXPECT_EQ(tg::narrow(x, -1, 1, 2).at({1, 4, 1}), x.at({1, 4, 2}));
}

TEST(NarrowSplitCat, CatOfNineBuildsATreeAndEachGradientIsItsSlice) {
  tg::Rng rng(7);
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < 9; ++i) xs.push_back(tg::randn({2, 1 + i % 3}, rng).set_requires_grad());
  const Tensor y = tg::cat(xs, 1);  // more inputs than a node holds
  ASSERT_EQ(y.shape(), tg::Shape({2, 18}));
  Tensor plain;
  {
    tg::NoGradGuard no_grad;
    plain = tg::cat(xs, 1);
  }
  EXPECT_EQ(y.to_vector(), plain.to_vector());
  const Tensor W = tg::randn({2, 18}, rng);
  for (bool create_graph : {false, true}) {
    const std::vector<Tensor> g = tg::grad({y}, xs, {W}, create_graph, true);
    int64_t at = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      EXPECT_EQ(g[i].to_vector(), tg::narrow(W, 1, at, xs[i].size(1)).to_vector());
      at += xs[i].size(1);
    }
  }
}

TEST(NarrowSplitCat, MoveIndicesToo) {
  const Tensor batch = tg::from_indices({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor x = tg::narrow(batch, 1, 0, 2), y = tg::narrow(batch, 1, 1, 2);
  EXPECT_EQ(x.dtype(), tg::Dtype::i64);
  EXPECT_EQ(x.to_vector(), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(tg::cat({x, y}, 0).to_vector(), (std::vector<double>{1, 2, 4, 5, 2, 3, 5, 6}));
}

TEST(NarrowSplitCat, KernelMatchesFormula) {
  tg::Rng rng(8);
  expect_kernel_matches_formula(
      [](const std::vector<Tensor>& x) { return tg::narrow(x[0], 2, 1, 2); },
      {tg::randn({2, 3, 4, 2}, rng)});
}

// Negative control: narrow with its gradient placed one position off must fail gradcheck, so the
// registry's narrow cases can fail.
TEST(NarrowSplitCat, MisplacedGradientFailsGradcheck) {
  tg::Rng rng(9);
  auto wrong = [](const std::vector<Tensor>& x) {
    const Tensor y = tg::narrow(x[0].detach(), 0, 1, 2);
    auto misplaced = [](const Tensor& dY) -> tg::Grads {
      return {tg::cat({tg::zeros({2, 3}), dY}, 0)};  // should be rows 1..2, not 2..3
    };
    return tg::Tensor(tg::record("narrow_misplaced", y, {x[0]}).formula(misplaced));
  };
  tg::GradcheckOptions o;
  o.warn_vacuous = false;
  EXPECT_FALSE(tg::gradcheck(wrong, {tg::randn({4, 3}, rng)}, o).passed);
  auto right = [](const std::vector<Tensor>& x) { return tg::narrow(x[0], 0, 1, 2); };
  EXPECT_TRUE(tg::gradcheck(right, {tg::randn({4, 3}, rng)}, o).passed);
}

TEST(Dropout, MaskStatistics) {
  const double p = 0.3;
  tg::Rng rng(10);
  const Tensor y = tg::dropout(tg::ones({200, 500}), p, true, rng);
  int64_t kept = 0;
  for (double v : y.to_vector()) {
    if (v != 0.0) {
      ++kept;
      EXPECT_EQ(v, 1.0 / (1.0 - p));
    }
  }
  // 100000 draws: the kept fraction's standard deviation is 0.0014; 0.01 is seven of them.
  EXPECT_NEAR(double(kept) / 100000.0, 1.0 - p, 0.01);
}

// The mask is [rng.uniform(0, 1) >= p] entry by entry, one draw each in order (the kernel
// compares raw draws against a threshold instead): at rates whose threshold is exact, near 0 and
// near 1, in both dtypes, with the rng left where as many uniform draws leave it.
TEST(Dropout, MaskIsOneUniformDrawPerEntry) {
  for (const double p : {0.25, 0.5, 1.0 / 3, 0.1, 0x1p-64, 1e-300, 0.999999, 1 - 0x1p-53})
    for (const tg::Dtype dtype : {tg::Dtype::f32, tg::Dtype::f64}) {
      tg::Rng rng(17), reference(17);
      const int64_t n = 1000;  // blocks of 256 and a remainder
      const std::vector<double> y = tg::dropout(tg::ones({n}, dtype), p, true, rng).to_vector();
      const double scale = dtype == tg::Dtype::f32 ? double(float(1 / (1 - p))) : 1 / (1 - p);
      int64_t differ = 0;
      for (int64_t i = 0; i < n; ++i)
        differ += y[i] != (reference.uniform(0, 1) >= p ? scale : 0.0);
      EXPECT_EQ(differ, 0) << "p " << p;
      EXPECT_EQ(rng.engine(), reference.engine()) << "p " << p;
    }
  // Negative control: the reference one draw behind disagrees.
  tg::Rng rng(17), behind(17);
  behind.engine().discard(1);
  const std::vector<double> y =
      tg::dropout(tg::ones({1000}, tg::Dtype::f64), 0.5, true, rng).to_vector();
  int64_t differ = 0;
  for (double v : y) differ += v != (behind.uniform(0, 1) >= 0.5 ? 2.0 : 0.0);
  EXPECT_GT(differ, 300);
}

// The threshold itself (random draws almost never land next to it): the least draw k with
// unit(k) >= p, so unit(k - 1) < p, at rates with exact and inexact thresholds, at the ends of
// [0, 1) and at every double near 0.25 and 1 - 2^-53.
TEST(Dropout, FirstKeptDrawIsTheLeastDrawAtOrAboveTheRate) {
  std::vector<double> rates = {0.0,  0x1p-64, 0x1.8p-64, 1e-300, 1e-20, 0.1,      0.25,
                               1.0 / 3, 0.5, 0.75, 0.9,      0.999999, 1 - 0x1p-53};
  for (double p = 0.25, k = 0; k < 4; ++k, p = std::nextafter(p, 1.0)) rates.push_back(p);
  for (double p = 0.25, k = 0; k < 4; ++k, p = std::nextafter(p, 0.0)) rates.push_back(p);
  rates.push_back(std::nextafter(1 - 0x1p-53, 0.0));
  for (const double p : rates) {
    const uint64_t k = tg::detail::first_kept_draw(p);
    EXPECT_GE(tg::Rng::unit(k), p) << "p " << p;
    if (k > 0) {
      EXPECT_LT(tg::Rng::unit(k - 1), p) << "p " << p;
    }
  }
  EXPECT_EQ(tg::detail::first_kept_draw(0.0), 0u);
  // 2^62 - 256 lies halfway between the doubles 2^62 - 512 and 2^62 and rounds to the even one,
  // 2^62: the first draw that makes 0.25; 2^62 - 257 makes the double below.
  EXPECT_EQ(tg::detail::first_kept_draw(0.25), (uint64_t{1} << 62) - 256);
}

TEST(Dropout, SameSeedSameMask) {
  tg::Rng a(11), b(11), c(12);
  const Tensor x = tg::ones({50, 20});
  const auto ya = tg::dropout(x, 0.5, true, a).to_vector();
  EXPECT_EQ(ya, tg::dropout(x, 0.5, true, b).to_vector());
  EXPECT_NE(ya, tg::dropout(x, 0.5, true, c).to_vector());
  EXPECT_NE(ya, tg::dropout(x, 0.5, true, a).to_vector()) << "the rng moves on";
}

TEST(Dropout, EvalAndPZeroReturnTheInput) {
  tg::Rng rng(13);
  const Tensor x = tg::randn({3, 4}, rng);
  EXPECT_EQ(tg::dropout(x, 0.5, false, rng).impl_ptr(), x.impl_ptr());
  EXPECT_EQ(tg::dropout(x, 0.0, true, rng).impl_ptr(), x.impl_ptr());
}

TEST(Dropout, POneGivesZerosAndZeroGradient) {
  tg::Rng rng(14);
  const Tensor x = tg::randn({3, 4}, rng).set_requires_grad();
  const Tensor y = tg::dropout(x, 1.0, true, rng);
  for (double v : y.to_vector()) EXPECT_EQ(v, 0.0);
  for (double v : tg::grad({y}, {x}, {tg::ones({3, 4})})[0].to_vector()) EXPECT_EQ(v, 0.0);
}

TEST(Dropout, GradientIsTheMask) {
  tg::Rng rng(15);
  const Tensor x = tg::randn({4, 6}, rng).set_requires_grad();
  const Tensor G = tg::randn({4, 6}, rng);
  for (bool create_graph : {false, true}) {
    tg::Rng drop(16);
    const Tensor y = tg::dropout(x, 0.4, true, drop);
    const Tensor dx = tg::grad({y}, {x}, {G}, create_graph)[0];
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        const double mask = y.at({i, j}) / x.at({i, j});  // 0 or 1 / 0.6
        EXPECT_NEAR(dx.at({i, j}), G.at({i, j}) * mask, 1e-15);
      }
  }
}

}  // namespace
