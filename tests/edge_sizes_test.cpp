// Edge sizes, each with its defined behaviour written next to its test:
//   - T = 1 and d = 1 attention, single and multi-head, fused and composed, against a plain-loop
//     reference: at T = 1 the weights are exactly [[1]] and dL/dW_Q = dL/dW_K = 0 exactly;
//   - empty tensors: every op gives a defined result (sum of nothing = 0, matmul with K = 0 is
//     zeros) and a gradient of the input's shape, or throws a tg::Error;
//   - a chain of 1,000,000 ops: forward, backward and destruction without stack overflow, and
//     memory that does not keep growing from one such chain to the next.
// Expected values come from the math (plain loops in long double), never from the library.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

namespace {

using tg::Dtype;
using tg::Shape;
using tg::Tensor;
using tg::test::rss_bytes;
using V = std::vector<double>;

Tensor randn(const Shape& s, uint64_t seed) {
  tg::Rng rng(seed);
  return tg::randn(s, rng);
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

// A window of 1: each query sees only its own key, its weight is exactly 1, so dP_ii - D_i must
// be exactly 0 (the kernel sums D_i = dO_i . O_i as sum_j P_ij dP_ij) and dQ, dK exactly 0,
// dV exactly dO, whichever product computes dP = dO_i V^T (T 13, 70, 200: one to four 64-row
// blocks; d_v 5 and 37: the tiny products, the panel kernel, Eigen's or BLIS's by the build),
// float32 and float64, weights kept and recomputed. Negative control: a window of 2 gives a
// nonzero dQ.
TEST(EdgeAttention, AWindowOfOneGivesExactlyZeroQueryAndKeyGradients) {
  const std::size_t limit = tg::detail::attention_weights_limit();
  for (const Dtype dtype : {Dtype::f32, Dtype::f64})
    for (const auto& [T, dv] : {std::pair<int64_t, int64_t>{13, 5}, {13, 37}, {70, 37}, {200, 37}})
      for (const bool recompute : {false, true}) {
        SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + " T " + std::to_string(T) + " d_v " +
                     std::to_string(dv) + (recompute ? " recomputed" : " kept"));
        tg::detail::set_attention_weights_limit(recompute ? 0 : limit);
        tg::Rng rng(uint64_t(T) * 3 + recompute);
        const Tensor q = tg::randn({2, T, 8}, rng, dtype).set_requires_grad();
        const Tensor k = tg::randn({2, T, 8}, rng, dtype).set_requires_grad();
        const Tensor v = tg::randn({2, T, dv}, rng, dtype).set_requires_grad();
        const Tensor dO = tg::randn({2, T, dv}, rng, dtype);
        for (const int64_t window : {1, 2}) {
          const Tensor o = tg::causal_attention(q, k, v, 0.35, window);
          const std::vector<Tensor> g = tg::grad({o}, {q, k, v}, {dO});
          double dq_max = 0;
          for (double x : g[0].to_vector()) dq_max = std::max(dq_max, std::fabs(x));
          if (window == 2) {
            EXPECT_GT(dq_max, 1e-3);
            continue;
          }
          EXPECT_EQ(dq_max, 0.0);
          for (double x : g[1].to_vector()) EXPECT_EQ(x, 0.0);
          EXPECT_EQ(g[2].to_vector(), dO.to_vector());
          EXPECT_EQ(o.to_vector(), v.to_vector());
        }
      }
  tg::detail::set_attention_weights_limit(limit);
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
      {"attention_qkv_T0", {2, 0, 6}, [](X x) { return tg::causal_attention_qkv(x, 2, 1.0); },
       {2, 0, 2}, {}},
      {"attention_qkv_B0", {0, 3, 6}, [](X x) { return tg::causal_attention_qkv(x, 1, 1.0); },
       {0, 3, 2}, {}},
      {"attention_qkv_C0", {3, 0}, [](X x) { return tg::causal_attention_qkv(x, 1, 1.0); },
       {3, 0}, {}},
      {"max_pool2d_N0", {0, 2, 4, 4}, [](X x) { return tg::max_pool2d(x, 2); }, {0, 2, 2, 2}, {}},
      {"max_pool2d_C0_3x3", {2, 0, 4, 4}, [](X x) { return tg::max_pool2d(x, 3, 1, 1); },
       {2, 0, 4, 4}, {}},
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
