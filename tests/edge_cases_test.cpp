// Edge values, each with its defined behaviour written next to its test:
//   - huge logits (+-1e4, +-1e30, near the dtype's max) through softmax: finite, rows sum to 1,
//     equal to the softmax of the logits minus their row max; finite gradient;
//   - -inf masks give exactly 0 weight and exactly 0 gradient; a fully masked row gives zeros and
//     zero gradient (first and second order), never NaN;
//   - NaN and Inf inputs propagate (IEEE): NaN out where a NaN or inf - inf reaches, nothing
//     throws or hangs; fused and composed attention agree on which outputs are NaN.
// Edge sizes (T = 1, empty tensors, a 1,000,000-op chain) are in edge_sizes_test.cpp.
// Expected values come from the math (plain loops in long double), never from the library.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>

namespace {

using tg::Dtype;
using tg::Shape;
using tg::Tensor;
using V = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

Tensor randn(const Shape& s, uint64_t seed) {
  tg::Rng rng(seed);
  return tg::randn(s, rng);
}

// Softmax of each row of length n, in long double after subtracting the row max.
V reference_softmax(const V& x, std::size_t n) {
  V y(x.size());
  for (std::size_t r = 0; r < x.size(); r += n) {
    long double mx = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < n; ++j) mx = std::max<long double>(mx, x[r + j]);
    for (std::size_t j = 0; j < n; ++j) sum += std::exp(x[r + j] - mx);
    for (std::size_t j = 0; j < n; ++j)
      y[r + j] = mx == -INFINITY ? 0.0 : double(std::exp(x[r + j] - mx) / sum);
  }
  return y;
}

// dX = Y * (dY - sum(dY * Y)) per row of length n: softmax's gradient, from its output.
V reference_softmax_grad(const V& y, const V& dy, std::size_t n) {
  V dx(y.size());
  for (std::size_t r = 0; r < y.size(); r += n) {
    long double dot = 0;
    for (std::size_t j = 0; j < n; ++j) dot += dy[r + j] * y[r + j];
    for (std::size_t j = 0; j < n; ++j) dx[r + j] = double(y[r + j] * (dy[r + j] - dot));
  }
  return dx;
}

// Huge logits: the stable softmax sees only differences from the row max, so rows of +-1e4 or
// +-1e30 (or near DBL_MAX / FLT_MAX) give finite weights summing to 1, and finite gradients.
TEST(EdgeSoftmax, HugeLogitsStayFinite) {
  const struct {
    const char* name;
    V x;
    Dtype dtype;
    double tol;
  } cases[] = {
      {"1e4_f64", {1e4, 1e4 - 0.7, -1e4, 1e4 + 0.3, -1e4, -1e4 + 1.2, -1e4 - 0.4, -1e4 + 0.1},
       Dtype::f64, 1e-12},
      {"1e4_f32", {1e4, 1e4 - 1, -1e4, 1e4 + 2, -1e4, -1e4 + 1, -1e4 - 2, -1e4 + 3}, Dtype::f32,
       1e-6},
      {"1e30_f64", {1e30, -1e30, 0, 5, -1e30, -1e30, 1e30, 1e30}, Dtype::f64, 1e-12},
      {"1e30_f32", {1e30, -1e30, 0, 5, -1e30, -1e30, 1e30, 1e30}, Dtype::f32, 1e-6},
      {"near_max_f64", {1.7e308, -1.7e308, 0, 1.7e308, -1.7e308, 1, 2, 3}, Dtype::f64, 1e-12},
      {"near_max_f32", {3e38, -3e38, 0, 3e38, -3e38, 1, 2, 3}, Dtype::f32, 1e-6}};
  const V w = {0.3, -1.2, 0.8, 2.0, -0.5, 1.1, 0.4, -2.2};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = tg::from_vector(c.x, {2, 4}, c.dtype).set_requires_grad();
    const Tensor y = tg::softmax(x);
    y.backward(tg::from_vector(w, {2, 4}, c.dtype));
    const V got = y.to_vector(), want = reference_softmax(x.to_vector(), 4);
    const V g = x.grad().to_vector(), want_g = reference_softmax_grad(want, w, 4);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], c.tol) << "Y at " << i;
      EXPECT_NEAR(g[i], want_g[i], 10 * c.tol) << "dX at " << i;
    }
    for (int r = 0; r < 2; ++r)
      EXPECT_NEAR(got[4 * r] + got[4 * r + 1] + got[4 * r + 2] + got[4 * r + 3], 1.0, c.tol);
  }
}

// -inf masks: masked weights are exactly 0 and get exactly 0 gradient; a row masked entirely is
// all zeros with zero gradient (first and second order) and its neighbours are untouched.
TEST(EdgeSoftmax, InfMasksAndFullyMaskedRows) {
  V m = tg::causal_mask(4, Dtype::f64, 2).to_vector();
  for (int j = 0; j < 4; ++j) m[2 * 4 + j] = -kInf;  // row 2 sees nothing
  for (Dtype dt : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(tg::dtype_name(dt));
    const Tensor M = tg::from_vector(m, {4, 4}, dt);
    const Tensor x = randn({2, 4, 4}, 5).detach().to(dt).set_requires_grad(), W = randn({2, 4, 4}, 6).to(dt);
    const Tensor y = tg::softmax(tg::add_mask(x, M));
    const Tensor g = tg::grad({tg::sum(tg::mul(y, W))}, {x}, {}, /*create_graph=*/true)[0];
    const Tensor hv = tg::grad({tg::sum(tg::mul(g, W))}, {x})[0];  // second order
    V masked = x.to_vector();
    for (std::size_t i = 0; i < masked.size(); ++i) masked[i] += m[i % 16];
    const V want = reference_softmax(masked, 4), got = y.to_vector();
    const V want_g = reference_softmax_grad(want, W.to_vector(), 4), dx = g.to_vector();
    const V h = hv.to_vector();
    const double tol = dt == Dtype::f64 ? 1e-12 : 1e-6;
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("element " + std::to_string(i));
      EXPECT_NEAR(got[i], want[i], tol);
      EXPECT_NEAR(dx[i], want_g[i], 10 * tol);
      EXPECT_TRUE(std::isfinite(h[i]));
      if (m[i % 16] == -kInf) {
        EXPECT_TRUE(got[i] == 0 && dx[i] == 0 && h[i] == 0);
      }
    }
  }
  for (const Shape& s : {Shape{3}, Shape{2, 1, 5}}) {  // all -inf straight into softmax
    const Tensor x = tg::full(s, -kInf).set_requires_grad();
    const Tensor y = tg::softmax(x);
    y.backward(tg::ones(s));
    for (double v : y.to_vector()) EXPECT_EQ(v, 0.0);
    for (double v : x.grad().to_vector()) EXPECT_EQ(v, 0.0);
  }
}

// NaN propagates as in IEEE arithmetic: a softmax row holding a NaN, or a +inf (inf - inf), is
// all NaN whatever else it holds, -inf entries included; other rows are unaffected. No throw.
TEST(EdgeNonFinite, SoftmaxRowsWithNanOrInfAreNan) {
  const V rows[] = {{kNan, 1, 2},         {1, 2, kNan},     {kNan, -kInf, -kInf},
                    {-kInf, kNan, -kInf}, {-kInf, -kInf, kNan}, {kInf, 0, 1},
                    {kInf, kInf, 0},      {-kInf, 0, kInf}};
  for (Dtype dt : {Dtype::f64, Dtype::f32})
    for (const V& row : rows) {
      SCOPED_TRACE(std::string(tg::dtype_name(dt)) + " row " + std::to_string(&row - rows));
      V v = row;
      v.insert(v.end(), {0.5, -1.0, 2.0});  // a finite second row
      const Tensor x = tg::from_vector(v, {2, 3}, dt).set_requires_grad();
      Tensor y;
      ASSERT_NO_THROW(y = tg::softmax(x); y.backward(tg::ones({2, 3}, dt)));
      const V got = y.to_vector(), g = x.grad().to_vector();
      for (int j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(got[j])) << j << " is " << got[j];
      for (int j = 3; j < 6; ++j) EXPECT_TRUE(std::isfinite(got[j]) && std::isfinite(g[j]));
    }
}

// max_pool2d's gradient is 0 plus dY at each window's maximum and 0 elsewhere, as zeros with dY
// added make it: a dY of -0 gives +0 there, in the 2 x 2 tiles' own scatter (odd sizes: the last
// row and column in no window) and in the general one (overlapping windows).
TEST(EdgeValues, MaxPoolGradientOfMinusZeroIsPlusZero) {
  tg::Rng rng(3);
  const Tensor x = tg::randn({2, 3, 5, 7}, rng, tg::Dtype::f64).set_requires_grad();
  for (const bool tiles : {true, false}) {
    SCOPED_TRACE(tiles ? "2 x 2 tiles" : "overlapping windows");
    const Tensor y = tiles ? tg::max_pool2d(x, 2) : tg::max_pool2d(x, 2, 1, 0);
    const Tensor dx = tg::grad({y}, {x}, {tg::full(y.shape(), -0.0, tg::Dtype::f64)})[0];
    int64_t minus = 0;
    for (double v : dx.to_vector()) {
      EXPECT_EQ(v, 0.0);
      minus += std::signbit(v);
    }
    EXPECT_EQ(minus, 0);
  }
  // Negative control: a dY of -1 reaches the 36 tiles' maxima as -1 each.
  const Tensor y = tg::max_pool2d(x, 2);
  const Tensor d1 = tg::grad({y}, {x}, {tg::full(y.shape(), -1.0, tg::Dtype::f64)})[0];
  int64_t ones = 0;
  for (double v : d1.to_vector()) ones += v == -1.0;
  EXPECT_EQ(ones, 36);
}

TEST(EdgeNonFinite, MatmulAndAddPropagate) {
  for (int64_t n : {2, 24}) {  // a tiny product and one through Eigen's blocked GEMM
    SCOPED_TRACE("n = " + std::to_string(n));
    V a(n * n, 1.0), b(n * n, 1.0);
    a[1 * n + 1] = kNan;  // row 1 of A B: all NaN
    a[0] = kInf;          // row 0: inf * 0 = NaN in column 0 (B[0, 0] = 0), inf elsewhere
    b[0] = 0.0;
    const Tensor A = tg::from_vector(a, {n, n}).set_requires_grad(), B = tg::from_vector(b, {n, n});
    Tensor Y;
    ASSERT_NO_THROW(Y = tg::matmul(A, B); tg::sum(Y).backward());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        SCOPED_TRACE("Y[" + std::to_string(i) + ", " + std::to_string(j) + "]");
        const double y = Y.at({i, j});
        if (i == 1 || (i == 0 && j == 0)) {
          EXPECT_TRUE(std::isnan(y));
        } else {
          EXPECT_EQ(y, i == 0 ? kInf : double(j == 0 ? n - 1 : n));
        }
      }
    for (double g : A.grad().to_vector()) EXPECT_TRUE(std::isfinite(g));  // dA = dY B^T
  }
  const Tensor s = tg::add(tg::from_vector({kNan, kInf, -kInf, 1}, {4}),
                           tg::from_vector({1, -kInf, 1, kInf}, {4}));
  EXPECT_TRUE(std::isnan(s.at({0})) && std::isnan(s.at({1})));
  EXPECT_EQ(s.at({2}), -kInf);
  EXPECT_EQ(s.at({3}), kInf);
}

// A NaN in Q[i] reaches output row i only and a NaN in K[j] the rows that see key j only: a
// masked entry is excluded whatever its score, as the -inf mask promises, so a NaN in the future
// never reaches the past. A NaN in V[j] reaches at least the rows that see j (0 * NaN is NaN, so
// rows with weight exactly 0 on j may get it too). Fused and composed attention both.
TEST(EdgeNonFinite, AttentionNanReachesWhatSeesIt) {
  const int64_t T = 4;
  for (int64_t window : {0, 1, 2})
    for (int which = 0; which < 3; ++which)
      for (int64_t pos : {0, 1, 2}) {
        SCOPED_TRACE("window " + std::to_string(window) + ", NaN in " + "QKV"[which] + "[" +
                     std::to_string(pos) + "]");
        std::vector<Tensor> in = {randn({T, 2}, 1), randn({T, 2}, 2), randn({T, 3}, 3)};
        const int64_t d = in[which].size(-1);
        for (int64_t c = 0; c < d; ++c) in[which].data<double>()[pos * d + c] = kNan;
        const V fused = tg::causal_attention(in[0], in[1], in[2], 0.7, window).to_vector();
        const V composed =
            tg::causal_attention_composed(in[0], in[1], in[2], 0.7, window).to_vector();
        for (int64_t i = 0; i < T; ++i) {
          const bool sees = which == 0 ? i == pos : pos <= i && (window == 0 || pos > i - window);
          if (!sees && which == 2) continue;
          EXPECT_EQ(std::isnan(fused[i * 3]), sees) << "fused row " << i;
          EXPECT_EQ(std::isnan(composed[i * 3]), sees) << "composed row " << i;
        }
      }
}

}  // namespace
