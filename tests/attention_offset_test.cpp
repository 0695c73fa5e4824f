// causal_attention and causal_attention_heads with a query offset (the queries are the last T of
// T_k positions, as a KV cache's new tokens) against the composed reference with the same
// shifted mask, and against the last T rows of the attention over all T_k positions: values and
// gradients (of the output reduced with fixed random weights, never a plain sum) in float64 and
// float32, over one and two 64-row blocks, windows, kept and recomputed weights. A reference with
// the mask left unshifted must disagree (the comparison can fail). gradcheck and gradgradcheck
// run here on one case and on every offset case of the registry (check/registry.cpp), with the
// kernel-formula agreement, in ops_gradcheck_test.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/ops/ops.h>
#include "attention_util.h"

namespace {

using tg::Dtype;
using tg::Shape;
using tg::Tensor;
using tg::test::rel_diff;

struct Case {
  const char* name;
  Shape q, k, v;   // Q (.., T, .), K and V (.., T_k, .)
  int64_t heads;   // 0: separate operands (causal_attention), else causal_attention_heads
  int64_t window;
  int64_t offset() const { return k[k.rank() - 2] - q[q.rank() - 2]; }
};

const Case kCases[] = {
    {"T2_after_3", {2, 3}, {5, 3}, {5, 2}, 0, 0},
    {"T1_after_7_batched", {2, 1, 4}, {2, 8, 4}, {2, 8, 3}, 0, 0},
    {"rank4_window2", {2, 2, 3, 2}, {2, 2, 6, 2}, {2, 2, 6, 2}, 0, 2},
    {"two_blocks_after_40", {1, 70, 4}, {1, 110, 4}, {1, 110, 2}, 0, 0},
    {"window5_skips_blocks", {90, 2}, {200, 2}, {200, 3}, 0, 5},
    {"heads_T1_after_9", {2, 1, 8}, {2, 10, 8}, {2, 10, 4}, 2, 0},
    {"heads_2d_window3", {5, 6}, {9, 6}, {9, 6}, 3, 3},
    {"heads_two_blocks", {1, 66, 8}, {1, 100, 8}, {1, 100, 8}, 2, 0},
    // A block's products run by chunks of 32 rows, each to its last row's key (the kernels'
    // for_chunks): a last chunk of 13 rows, and chunks after an offset under a window.
    {"chunks_of_32_and_13", {1, 45, 4}, {1, 45, 4}, {1, 45, 3}, 0, 0},
    {"chunks_after_17_window_20", {109, 4}, {126, 4}, {126, 2}, 0, 20},
    // Keys whose transposed rows are 4 KiB apart, padded by a cache line in the kernels
    // (attention_kernels.cpp's key_stride): 1024 of them in float32, 512 in float64.
    // With a window a block's keys start past 0 (and fit the panel kernel's 512 columns).
    {"keys_1024_after_954", {1, 70, 4}, {1, 1024, 4}, {1, 1024, 3}, 0, 0},
    {"keys_1024_window_200", {1, 70, 4}, {1, 1024, 4}, {1, 1024, 3}, 0, 200},
    {"heads_keys_512_after_446", {1, 66, 8}, {1, 512, 8}, {1, 512, 8}, 2, 0},
    {"heads_keys_512_window_60", {1, 66, 8}, {1, 512, 8}, {1, 512, 8}, 2, 60},
};

using Attend = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

Attend fused(const Case& c, double sc) {
  return [&c, sc](const Tensor& q, const Tensor& k, const Tensor& v) {
    return c.heads ? tg::causal_attention_heads(q, k, v, c.heads, sc, c.window, c.offset())
                   : tg::causal_attention(q, k, v, sc, c.window, c.offset());
  };
}

Attend composed(const Case& c, double sc) {
  return [&c, sc](const Tensor& q, const Tensor& k, const Tensor& v) {
    return c.heads
               ? tg::causal_attention_heads_composed(q, k, v, c.heads, sc, c.window, c.offset())
               : tg::causal_attention_composed(q, k, v, sc, c.window, c.offset());
  };
}

struct Attended {
  Tensor O;
  std::vector<Tensor> grads;  // dQ, dK, dV of L = sum(O * R)
};

Attended run(const std::vector<Tensor>& in, const Tensor& R, const Attend& attend) {
  std::vector<Tensor> x;
  for (const Tensor& t : in) x.push_back(t.detach().set_requires_grad());
  const Tensor O = attend(x[0], x[1], x[2]);
  return {O, tg::grad({tg::sum(tg::mul(O, R))}, x)};
}

// s with `rows` on axis -2.
Shape with_rows(const Shape& s, int64_t rows) {
  std::vector<int64_t> v = s.vec();
  v[v.size() - 2] = rows;
  return Shape(v);
}

struct Inputs {
  std::vector<Tensor> qkv;
  Tensor R;  // O's shape
  double sc;
};

Inputs inputs(const Case& c, Dtype dtype, uint64_t seed) {
  tg::Rng rng(seed);
  Inputs in;
  for (const Shape& s : {c.q, c.k, c.v}) in.qkv.push_back(tg::randn(s, rng, dtype));
  in.R = tg::randn(with_rows(c.v, c.q[c.q.rank() - 2]), rng, dtype);  // O's shape
  const int64_t d = c.q[c.q.rank() - 1] / std::max<int64_t>(c.heads, 1);
  in.sc = 1.0 / std::sqrt(static_cast<double>(d));
  return in;
}

void expect_agree(const Attended& a, const Attended& b, double tol) {
  EXPECT_LE(rel_diff(a.O, b.O), tol) << "values";
  const char* names[] = {"dQ", "dK", "dV"};
  for (int i = 0; i < 3; ++i) EXPECT_LE(rel_diff(a.grads[i], b.grads[i]), tol) << names[i];
}

void expect_matches_composed(Dtype dtype, double tol) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Inputs in = inputs(c, dtype, 3);
    const Attended f = run(in.qkv, in.R, fused(c, in.sc)), r = run(in.qkv, in.R, composed(c, in.sc));
    EXPECT_EQ(f.O.dtype(), dtype);
    expect_agree(f, r, tol);
  }
}

TEST(CausalAttentionOffset, MatchesComposedFloat64) { expect_matches_composed(Dtype::f64, 1e-12); }

TEST(CausalAttentionOffset, MatchesComposedFloat32) { expect_matches_composed(Dtype::f32, 1e-5); }

// With no room to keep the weights the backward recomputes them from the log-sum-exps.
TEST(CausalAttentionOffset, MatchesComposedWithWeightsRecomputed) {
  const std::size_t saved = tg::detail::attention_weights_limit();
  tg::detail::set_attention_weights_limit(0);
  expect_matches_composed(Dtype::f64, 1e-12);
  expect_matches_composed(Dtype::f32, 1e-5);
  tg::detail::set_attention_weights_limit(saved);
}

// The offset run is the last T rows of the run over all T_k positions, and its dK, dV those of
// the full run with R zero on the first rows. Not bit for bit: the two cut the rows into other
// 64-row blocks, so their products and softmax sums round in other groupings.
TEST(CausalAttentionOffset, IsTheLastRowsOfTheFullAttention) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Inputs in = inputs(c, Dtype::f64, 5);
    const int64_t T = c.q[c.q.rank() - 2], start = c.offset();
    tg::Rng rng(9);
    const Tensor Q_all = tg::cat({tg::randn(with_rows(c.q, start), rng), in.qkv[0]}, -2);
    const Tensor R_all = tg::cat({tg::zeros(with_rows(in.R.shape(), start)), in.R}, -2);
    Case full = c;
    full.q = Q_all.shape();
    const Attended all = run({Q_all, in.qkv[1], in.qkv[2]}, R_all, fused(full, in.sc));
    const Attended tail = run(in.qkv, in.R, fused(c, in.sc));
    const int axis = c.q.rank() - 2;
    EXPECT_LE(rel_diff(tail.O, tg::narrow(all.O, axis, start, T)), 1e-13) << "values";
    EXPECT_LE(rel_diff(tail.grads[0], tg::narrow(all.grads[0], axis, start, T)), 1e-12) << "dQ";
    EXPECT_LE(rel_diff(tail.grads[1], all.grads[1]), 1e-12) << "dK";
    EXPECT_LE(rel_diff(tail.grads[2], all.grads[2]), 1e-12) << "dV";
  }
}

// The negative control: the same Q, K, V with the mask not shifted (query i seeing keys up to i
// rather than up to offset + i) give other outputs, so the comparisons above can fail.
TEST(CausalAttentionOffset, AnUnshiftedMaskDisagrees) {
  const Case& c = kCases[0];
  const Inputs in = inputs(c, Dtype::f64, 3);
  const int64_t T = c.q[0], T_k = c.k[0];
  const Tensor S = tg::scale(tg::matmul(in.qkv[0], in.qkv[1], false, true), in.sc);  // (T, T_k)
  const Tensor top_left = tg::narrow(tg::causal_mask(T_k), 0, 0, T);             // (T, T_k)
  const Tensor O = tg::matmul(tg::softmax(tg::add_mask(S, top_left)), in.qkv[2]);  // (T, d_v)
  EXPECT_GT(rel_diff(O, fused(c, in.sc)(in.qkv[0], in.qkv[1], in.qkv[2])), 1e-3);
}

TEST(CausalAttentionOffset, GradcheckAndGradgradcheck) {
  for (const Case& c : {kCases[0], kCases[5]}) {
    SCOPED_TRACE(c.name);
    const Inputs in = inputs(c, Dtype::f64, 7);
    const Attend f = fused(c, in.sc);
    const tg::Function fn = [&](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{f(x[0], x[1], x[2])};
    };
    const tg::GradcheckResult first = tg::gradcheck(fn, in.qkv);
    EXPECT_TRUE(first.passed) << first.message;
    EXPECT_FALSE(first.vacuous);
    const tg::GradcheckResult second = tg::gradgradcheck(fn, in.qkv);
    EXPECT_TRUE(second.passed) << second.message;
  }
}

// (T, T_k) masks: row i is position offset + i.
TEST(CausalAttentionOffset, CausalMaskIsTheLastRowsOfTheFullMask) {
  for (int64_t window : {0, 2})
    for (int64_t offset : {0, 1, 3}) {
      SCOPED_TRACE("window " + std::to_string(window) + ", offset " + std::to_string(offset));
      const Tensor full = tg::causal_mask(offset + 4, Dtype::f64, window);
      EXPECT_EQ(tg::causal_mask(4, Dtype::f64, window, offset).to_vector(),
                tg::narrow(full, 0, offset, 4).to_vector());
    }
}

TEST(CausalAttentionOffset, BadInputsName) {
  const auto z = [](const Shape& s) { return tg::zeros(s); };
  struct Bad {
    const char* name;
    std::function<void()> call;
    bool shape_error;  // else ValueError
    std::vector<std::string> fragments;
  };
  const std::vector<Bad> bad = {
      {"negative_offset", [&] { tg::causal_attention(z({2, 3}), z({1, 3}), z({1, 3}), 1, 0, -1); },
       false, {"causal_attention", "query_offset", "-1"}},
      {"k_rows", [&] { tg::causal_attention(z({2, 3}), z({4, 3}), z({4, 3}), 1, 0, 3); }, true,
       {"causal_attention", "(2, 3)", "(4, 3)", "query_offset"}},
      {"v_rows", [&] { tg::causal_attention(z({2, 3}), z({5, 3}), z({4, 3}), 1, 0, 3); }, true,
       {"causal_attention", "(5, 3)", "(4, 3)", "query_offset"}},
      {"heads_k_rows",
       [&] { tg::causal_attention_heads(z({1, 2, 4}), z({1, 2, 4}), z({1, 2, 4}), 2, 1, 0, 1); },
       true, {"causal_attention_heads", "(1, 2, 4)", "query_offset"}},
      {"composed_k_rows",
       [&] { tg::causal_attention_composed(z({2, 3}), z({4, 3}), z({4, 3}), 1, 0, 3); }, true,
       {"causal_attention", "(4, 3)"}},
      {"mask_negative_offset", [] { tg::causal_mask(3, Dtype::f64, 0, -2); }, false,
       {"causal_mask", "query_offset", "-2"}},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    try {
      b.call();
      ADD_FAILURE() << "no error";
    } catch (const tg::Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(dynamic_cast<const tg::ShapeError*>(&e) != nullptr, b.shape_error) << what;
      EXPECT_EQ(dynamic_cast<const tg::ValueError*>(&e) != nullptr, !b.shape_error) << what;
      for (const std::string& f : b.fragments)
        EXPECT_NE(what.find(f), std::string::npos) << "missing '" << f << "' in: " << what;
    }
  }
}

}  // namespace
