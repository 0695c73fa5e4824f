// Edge cases, each with its defined behaviour written next to its test:
//   - huge logits (+-1e4, +-1e30, near the dtype's max) through softmax: finite, rows sum to 1,
//     equal to the softmax of the logits minus their row max; finite gradient;
//   - -inf masks give exactly 0 weight and exactly 0 gradient; a fully masked row gives zeros and
//     zero gradient (first and second order), never NaN;
//   - NaN and Inf inputs propagate (IEEE): NaN out where a NaN or inf - inf reaches, nothing
//     throws or hangs; fused and composed attention agree on which outputs are NaN;
//   - T = 1 and d = 1 attention, single and multi-head, fused and composed, against a plain-loop
//     reference: at T = 1 the weights are exactly [[1]] and dL/dW_Q = dL/dW_K = 0 exactly;
//   - empty tensors: every op gives a defined result (sum of nothing = 0, matmul with K = 0 is
//     zeros) and a gradient of the input's shape, or throws a tg::Error;
//   - a chain of 1,000,000 ops: forward, backward and destruction without stack overflow, and
//     memory that does not keep growing from one such chain to the next.
// Expected values come from the math (plain loops in long double), never from the library.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "check/gradcheck.h"
#include "autograd/node.h"
#include "nn/attention.h"
#include "ops/ops.h"

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif

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
    const Tensor x = randn({2, 4, 4}, 5).to(dt).set_requires_grad(), W = randn({2, 4, 4}, 6).to(dt);
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

// Plain-loop multi-head causal attention (nanoGPT head layout) in long double; X is (B, T, D).
V reference_attention(const V& X, const std::vector<V>& W, int64_t B, int64_t T, int64_t D,
                      int64_t dk, int64_t dv, int64_t H) {
  auto proj = [&](int w, int64_t d, int64_t b, int64_t t, int64_t c) {  // (X W[w])[b, t, c]
    long double s = 0;
    for (int64_t k = 0; k < D; ++k) s += X[(b * T + t) * D + k] * W[w][k * d + c];
    return s;
  };
  const int64_t hk = dk / H, hv = dv / H;
  V O(B * T * dv), Y(B * T * dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<long double> p(i + 1);
        long double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          long double s = 0;
          for (int64_t c = h * hk; c < (h + 1) * hk; ++c)
            s += proj(0, dk, b, i, c) * proj(1, dk, b, j, c);
          mx = std::max(mx, p[j] = s / std::sqrt((long double)hk));
        }
        for (auto& x : p) sum += x = std::exp(x - mx);
        for (int64_t c = h * hv; c < (h + 1) * hv; ++c) {
          long double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] / sum * proj(2, dv, b, j, c);
          O[(b * T + i) * dv + c] = double(o);
        }
      }
  if (W.size() < 4) return O;
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t c = 0; c < dv; ++c) {
      long double s = 0;
      for (int64_t k = 0; k < dv; ++k) s += O[r * dv + k] * W[3][k * dv + c];
      Y[r * dv + c] = double(s);
    }
  return Y;
}

// T = 1 and head size d = 1, single and multi-head, fused (need_weights false) and composed
// (true), with and without W_O, 2-D and 3-D X: Y matches the reference, the weights of T = 1 are
// exactly 1 and then W_Q, W_K get exactly zero gradient; every parameter passes gradcheck.
TEST(EdgeAttention, OnePositionAndOneDimension) {
  struct Case {
    int64_t B, T, D, dk, dv, H;  // B = 0: a 2-D X
  };
  const Case cases[] = {{0, 1, 3, 2, 2, 1}, {2, 1, 4, 4, 4, 2}, {0, 5, 1, 1, 1, 1},
                        {2, 4, 3, 2, 2, 2}, {0, 1, 1, 1, 1, 1}, {1, 3, 2, 3, 3, 3}};
  for (const Case& c : cases)
    for (bool need_weights : {true, false})
      for (bool wo : {false, true}) {
        SCOPED_TRACE("B " + std::to_string(c.B) + " T " + std::to_string(c.T) + " D " +
                     std::to_string(c.D) + " d_k " + std::to_string(c.dk) + " H " +
                     std::to_string(c.H) + (need_weights ? " composed" : " fused") +
                     (wo ? " W_O" : ""));
        tg::AttentionOptions o;
        o.heads = c.H;
        o.need_weights = need_weights;
        tg::Rng rng(c.T * 100 + c.D);
        const tg::nn::QKVAttention m(c.D, c.dk, c.dv, o, wo, rng, Dtype::f64, 0.8);
        const Tensor X = tg::randn(c.B ? Shape{c.B, c.T, c.D} : Shape{c.T, c.D}, rng);
        std::vector<Tensor> params = m.parameters();
        params.push_back(X.detach().set_requires_grad());
        const tg::AttentionOutput out = m.forward(params.back());
        std::vector<V> w;
        for (std::size_t k = 0; k + 1 < params.size(); ++k) w.push_back(params[k].to_vector());
        const V want = reference_attention(X.to_vector(), w, std::max<int64_t>(c.B, 1), c.T, c.D,
                                           c.dk, c.dv, c.H);
        const V got = out.Y.to_vector();
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
        EXPECT_EQ(out.A.defined(), need_weights);
        if (need_weights && c.T == 1) {
          for (double a : out.A.to_vector()) EXPECT_EQ(a, 1.0);
        }
        const Tensor L = tg::sum(tg::mul(out.Y, randn(out.Y.shape(), 9)));
        const std::vector<Tensor> g = tg::grad({L}, params);
        for (int p = 0; p < 2 && c.T == 1; ++p) {
          for (double v : g[p].to_vector()) EXPECT_EQ(v, 0.0) << (p ? "dW_K" : "dW_Q");
        }
        const tg::Function f = [&](const std::vector<Tensor>& x) {
          const Tensor W_O = wo ? x[3] : Tensor();
          const Tensor Y = c.H == 1 ? tg::single_head_attention(x.back(), x[0], x[1], x[2], W_O, o).Y
                                    : tg::multi_head_attention(x.back(), x[0], x[1], x[2], W_O, o).Y;
          return std::vector<Tensor>{Y};
        };
        const int threads = tg::num_threads();
        tg::set_num_threads(1);  // the fused op's per-call thread start-up would dominate
        const tg::GradcheckResult r = tg::gradcheck(f, params);
        tg::set_num_threads(threads);
        EXPECT_TRUE(r.passed) << r.message;
      }
}

// Empty tensors: each op's result for an input with a 0 dimension, and a gradient of the input's
// shape. Reductions over nothing are 0; matmul with K = 0 is zeros; sum_to of nothing is zeros;
// attention with T = 0 is empty, with d = 0 every score is 0 and row i averages V[0..i].
TEST(EdgeEmpty, EveryOpGivesADefinedResult) {
  using X = const Tensor&;
  const Tensor v3 = tg::from_vector({1, 3, 5}, {3, 1});
  const struct {
    const char* name;
    Shape in;
    std::function<Tensor(X)> f;
    Shape out;
    V values;  // checked when the output is not empty
  } cases[] = {
      {"sum_all", {0, 3}, [](X x) { return tg::sum(x); }, {}, {0}},
      {"sum_axis0", {0, 3}, [](X x) { return tg::sum(x, 0); }, {3}, {0, 0, 0}},
      {"sum_axis1_keepdim", {0, 3}, [](X x) { return tg::sum(x, 1, true); }, {0, 1}, {}},
      {"sum_of_squares", {2, 0}, [](X x) { return tg::sum_of_squares(x); }, {}, {0}},
      {"matmul_K0", {2, 0}, [](X x) { return tg::matmul(x, tg::ones({0, 3})); }, {2, 3}, V(6)},
      {"matmul_K0_batched", {2, 2, 0}, [](X x) { return tg::matmul(x, tg::ones({2, 0, 3})); },
       {2, 2, 3}, V(12)},
      {"matmul_K0_transposed", {0, 2},
       [](X x) { return tg::matmul(x, tg::ones({3, 0}), true, true); }, {2, 3}, V(6)},
      {"matmul_M0", {0, 2}, [](X x) { return tg::matmul(x, tg::ones({2, 3})); }, {0, 3}, {}},
      {"matmul_batch0", {0, 2, 2}, [](X x) { return tg::matmul(x, tg::ones({1, 2, 3})); },
       {0, 2, 3}, {}},
      {"transpose", {2, 0, 3}, [](X x) { return tg::transpose(x); }, {2, 3, 0}, {}},
      {"permute", {0, 3, 2}, [](X x) { return tg::permute(x, {2, 0, 1}); }, {2, 0, 3}, {}},
      {"reshape", {0, 3}, [](X x) { return tg::reshape(x, {3, -1}); }, {3, 0}, {}},
      {"scale", {0}, [](X x) { return tg::scale(x, 2.0); }, {0}, {}},
      {"softmax_rows0", {0, 3}, [](X x) { return tg::softmax(x); }, {0, 3}, {}},
      {"softmax_cols0", {3, 0}, [](X x) { return tg::softmax(x); }, {3, 0}, {}},
      {"add_mask", {0, 2, 2}, [](X x) { return tg::add_mask(x, tg::causal_mask(2)); }, {0, 2, 2},
       {}},
      {"add", {0, 3}, [](X x) { return tg::add(x, tg::ones({3})); }, {0, 3}, {}},
      {"sub_to_empty", {1, 3}, [](X x) { return tg::sub(x, tg::ones({0, 3})); }, {0, 3}, {}},
      {"mul_scalar", {0}, [](X x) { return tg::mul(x, tg::scalar(2.0)); }, {0}, {}},
      {"broadcast_to", {3}, [](X x) { return tg::broadcast_to(x, {0, 3}); }, {0, 3}, {}},
      {"sum_to_leading", {0, 3}, [](X x) { return tg::sum_to(x, {3}); }, {3}, {0, 0, 0}},
      {"sum_to_keep", {2, 0}, [](X x) { return tg::sum_to(x, {2, 1}); }, {2, 1}, {0, 0}},
      {"rope", {0, 3, 4}, [](X x) { return tg::rope(x); }, {0, 3, 4}, {}},
      {"attention_T0_fused", {0, 2},
       [](X x) { return tg::causal_attention(x, x, tg::ones({0, 3}), 1.0); }, {0, 3}, {}},
      {"attention_T0_composed", {0, 2},
       [](X x) { return tg::causal_attention_composed(x, x, tg::ones({0, 3}), 1.0); }, {0, 3}, {}},
      {"attention_B0", {0, 3, 2}, [](X x) { return tg::causal_attention(x, x, x, 1.0); },
       {0, 3, 2}, {}},
      {"attention_dv0", {3, 2},
       [](X x) { return tg::causal_attention(x, x, tg::ones({3, 0}), 1.0); }, {3, 0}, {}},
      {"attention_d0_fused", {3, 0}, [&](X x) { return tg::causal_attention(x, x, v3, 1.0); },
       {3, 1}, {1, 2, 3}},
      {"attention_d0_composed", {3, 0},
       [&](X x) { return tg::causal_attention_composed(x, x, v3, 1.0); }, {3, 1}, {1, 2, 3}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor x = tg::zeros(c.in).set_requires_grad();
    Tensor y;
    try {
      y = c.f(x);
    } catch (const tg::Error& e) {
      ADD_FAILURE() << "threw " << e.what();
      continue;
    }
    ASSERT_EQ(y.shape(), c.out);
    if (y.numel() > 0) {
      EXPECT_EQ(y.to_vector(), c.values);
    }
    if (!y.requires_grad()) continue;
    ASSERT_NO_THROW(y.backward(tg::ones(y.shape())));
    EXPECT_EQ(x.grad().shape(), c.in);
  }
  // Inputs that make no sense throw a tg::Error, never crash.
  EXPECT_THROW(tg::add(tg::zeros({2, 3}), tg::zeros({0, 3})), tg::ShapeError);
  EXPECT_THROW(tg::matmul(tg::zeros({0, 2, 2}), tg::zeros({2, 2, 3})), tg::ShapeError);
  EXPECT_THROW(tg::reshape(tg::zeros({0, 3}), {-1, 0}), tg::ShapeError);  // -1 is ambiguous
}

// Current resident set, bytes.
std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// A chain of 1,000,000 scale(., 1.0) ops: forward, backward (gradient exactly 1) and destruction
// run without recursion; each node costs ~450 bytes, ~450 MB for the chain. Memory does not
// keep growing: after a chain is gone and empty_cache() ran, the cache is empty and RSS stays
// within 32 MiB of where the first chain left it. glibc keeps freed small blocks resident until
// malloc_trim; after it, RSS is back within 64 MiB of the start (every node really was freed).
TEST(EdgeChain, MillionOpsForwardBackwardAndFree) {
  constexpr int kOpsInChain = 1000000;
  [[maybe_unused]] const std::size_t before = rss_bytes();
  [[maybe_unused]] std::size_t after_first = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    {
      const Tensor x = tg::from_vector({1, 2, 3}, {3}).set_requires_grad();
      Tensor y = x;
      for (int i = 0; i < kOpsInChain; ++i) y = tg::scale(y, 1.0);
      if (round != 1) {  // round 1 frees a chain that never ran backward (closures alive)
        tg::sum(y).backward();
        EXPECT_EQ(x.grad().to_vector(), (V{1, 1, 1}));
      }
    }
    tg::empty_cache();
    EXPECT_EQ(tg::allocator_stats().cached_bytes, 0u);
#if defined(TG_ASAN)
    GTEST_SKIP() << "resident memory is meaningless under AddressSanitizer";
#else
    if (round == 0) after_first = rss_bytes();
    EXPECT_LE(rss_bytes(), after_first + (std::size_t{32} << 20)) << "RSS grows chain after chain";
#if defined(__GLIBC__)
    malloc_trim(0);
    EXPECT_LE(rss_bytes(), before + (std::size_t{64} << 20)) << "a chain's nodes were not freed";
#endif
#endif
  }
}

}  // namespace
