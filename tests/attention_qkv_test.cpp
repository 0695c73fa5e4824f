// causal_attention_qkv against what it replaces: split(QKV, C, -1) then causal_attention_heads.
// Values and gradients (of the output reduced with fixed random weights, never a plain sum)
// agree in float64 and float32, over one and two 64-row blocks, windows, kept and recomputed
// weights; a reference with K and V swapped must disagree (the comparison can fail).
// Kernel-vs-formula agreement, gradcheck and gradgradcheck run on its registry cases.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "attention_util.h"

namespace {

using tg::Dtype;
using tg::Shape;
using tg::Tensor;
using tg::test::rel_diff;
using V = std::vector<double>;

struct Case {
  const char* name;
  Shape shape;  // (T, 3C) or (B, T, 3C)
  int64_t heads;
  int64_t window;
};

const Case kCases[] = {
    {"batched_two_heads", {2, 5, 12}, 2, 0},
    {"2d_three_heads_window2", {6, 9}, 3, 2},
    {"T1", {3, 1, 6}, 1, 0},
    {"two_blocks_four_heads", {2, 70, 24}, 4, 0},
    {"two_blocks_window5", {1, 130, 12}, 2, 5},
};

// The output and dL/dQKV for L = sum(O * R), by `attend`.
template <class F>
std::pair<Tensor, Tensor> run(const Tensor& qkv_in, const Tensor& R, F attend) {
  Tensor qkv = qkv_in.detach().set_requires_grad();
  const Tensor O = attend(qkv);
  const Tensor dQKV = tg::grad({tg::sum(tg::mul(O, R))}, {qkv})[0];
  return {O, dQKV};
}

struct Inputs {
  Tensor qkv, R;
  int64_t C;
  double sc;
};

Inputs inputs(const Case& c, Dtype dtype, uint64_t seed) {
  tg::Rng rng(seed);
  Inputs in;
  in.qkv = tg::randn(c.shape, rng, dtype);
  in.C = c.shape[c.shape.rank() - 1] / 3;
  const Shape out =
      c.shape.rank() == 3 ? Shape{c.shape[0], c.shape[1], in.C} : Shape{c.shape[0], in.C};
  in.R = tg::randn(out, rng, dtype);
  in.sc = 1.0 / std::sqrt(static_cast<double>(in.C / c.heads));
  return in;
}

void expect_matches_split(const Case& c, Dtype dtype, double tol) {
  const Inputs in = inputs(c, dtype, 11);
  const auto fused = run(in.qkv, in.R, [&](const Tensor& x) {
    return tg::causal_attention_qkv(x, c.heads, in.sc, c.window);
  });
  const auto split = run(in.qkv, in.R, [&](const Tensor& x) {
    const std::vector<Tensor> qkv = tg::split(x, in.C, -1);
    return tg::causal_attention_heads(qkv[0], qkv[1], qkv[2], c.heads, in.sc, c.window);
  });
  EXPECT_EQ(fused.first.dtype(), dtype);
  EXPECT_LE(rel_diff(fused.first, split.first), tol) << "values";
  EXPECT_LE(rel_diff(fused.second, split.second), tol) << "gradients";
}

TEST(CausalAttentionQkv, MatchesSplitThenHeadsFloat64) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    expect_matches_split(c, Dtype::f64, 1e-12);
  }
}

TEST(CausalAttentionQkv, MatchesSplitThenHeadsFloat32) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    expect_matches_split(c, Dtype::f32, 1e-5);
  }
}

// With no room to keep the weights the backward recomputes them from the log-sum-exps.
TEST(CausalAttentionQkv, MatchesSplitThenHeadsWithWeightsRecomputed) {
  const std::size_t saved = tg::detail::attention_weights_limit();
  tg::detail::set_attention_weights_limit(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    expect_matches_split(c, Dtype::f64, 1e-12);
  }
  tg::detail::set_attention_weights_limit(saved);
}

// The fused backward writes every element of dQKV rather than adding into a zeroed buffer: a
// buffer full of NaN handed back by the caching allocator must not show through.
TEST(CausalAttentionQkv, GradientOverwritesARecycledBuffer) {
  const Case& c = kCases[3];
  const Inputs in = inputs(c, Dtype::f64, 5);
  for (int round = 0; round < 3; ++round) {
    {
      Tensor junk = tg::full(c.shape, std::numeric_limits<double>::quiet_NaN());
      ASSERT_TRUE(std::isnan(junk.to_vector()[0]));
    }
    const auto fused = run(in.qkv, in.R, [&](const Tensor& x) {
      return tg::causal_attention_qkv(x, c.heads, in.sc, c.window);
    });
    const V g = fused.second.to_vector();
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](double v) { return std::isfinite(v); }));
  }
}

// Negative control: a reference that reads K and V swapped must disagree, in values and in
// gradients, so the comparisons above can fail.
TEST(CausalAttentionQkv, SwappedKeysAndValuesDisagree) {
  const Case& c = kCases[0];
  const Inputs in = inputs(c, Dtype::f64, 11);
  const auto fused = run(in.qkv, in.R, [&](const Tensor& x) {
    return tg::causal_attention_qkv(x, c.heads, in.sc, c.window);
  });
  const auto swapped = run(in.qkv, in.R, [&](const Tensor& x) {
    const std::vector<Tensor> qkv = tg::split(x, in.C, -1);
    return tg::causal_attention_heads(qkv[0], qkv[2], qkv[1], c.heads, in.sc, c.window);
  });
  EXPECT_GT(rel_diff(fused.first, swapped.first), 1e-2);
  EXPECT_GT(rel_diff(fused.second, swapped.second), 1e-2);
}

// The create_graph path (the formula: split, the heads' formula, cat) gives the same first
// gradient as the kernel, and a second-order gradient that is not zero.
TEST(CausalAttentionQkv, CreateGraphMatchesKernel) {
  const Case& c = kCases[0];
  const Inputs in = inputs(c, Dtype::f64, 3);
  Tensor x = in.qkv.detach().set_requires_grad();
  const Tensor L = tg::sum(tg::mul(tg::causal_attention_qkv(x, c.heads, in.sc), in.R));
  const Tensor g_formula = tg::grad({L}, {x}, {}, /*create_graph=*/true)[0];
  const auto kernel = run(in.qkv, in.R, [&](const Tensor& q) {
    return tg::causal_attention_qkv(q, c.heads, in.sc);
  });
  EXPECT_LE(rel_diff(g_formula, kernel.second), 1e-12);
  const Tensor gg = tg::grad({tg::sum_of_squares(g_formula)}, {x})[0];
  const V v = gg.to_vector();
  EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double e) { return std::fabs(e) > 1e-8; }));
}

}  // namespace
