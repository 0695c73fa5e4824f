// The op-case table. Each row: the op, a case name, float64 inputs from a seed derived from the
// case name (so adding a row never changes another row's inputs), the function and its
// tolerances. A case's function must accept float32 inputs too: constants it captures (masks,
// reduction weights) are converted to the inputs' dtype when used.

#include <tapegrad/check/registry.h>
#include <tapegrad/check/registry_table.h>

#include <cmath>
#include <limits>
#include <utility>

#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>

namespace tg {

std::string OpCase::shapes() const {
  std::string s;
  for (std::size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + inputs[i].shape().str();
  return s;
}

namespace {

using namespace detail;

void matmul_cases(Table& t) {
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const Tensor& a, const Tensor& b) { return matmul(a, b, ta, tb); };
  };
  t.binary("matmul", "2d", {3, 4}, {4, 2}, mm(false, false));
  t.binary("matmul", "transpose_a", {4, 3}, {4, 2}, mm(true, false));
  t.binary("matmul", "transpose_b", {3, 4}, {2, 4}, mm(false, true));
  t.binary("matmul", "transpose_both", {4, 3}, {2, 4}, mm(true, true));
  t.binary("matmul", "1xN_at_Nx1", {1, 4}, {4, 1}, mm(false, false));
  t.binary("matmul", "Nx1_at_1xN", {3, 1}, {1, 2}, mm(false, false));
  t.binary("matmul", "BTD_at_DE", {2, 3, 4}, {4, 2}, mm(false, false));
  t.binary("matmul", "BTD_at_ED_transpose_b", {2, 3, 4}, {2, 4}, mm(false, true));
  t.binary("matmul", "BDT_transpose_a_at_DE", {2, 4, 3}, {4, 2}, mm(true, false));
  t.binary("matmul", "T1_BTD_at_DE", {2, 1, 3}, {3, 2}, mm(false, false));
  t.binary("matmul", "rank4_broadcast_batch", {2, 1, 3, 4}, {3, 4, 2}, mm(false, false));
  t.binary("matmul", "rank2_at_batched", {3, 4}, {2, 4, 2}, mm(false, false));
  t.binary("matmul", "rank4_both_transposed", {1, 2, 4, 3}, {2, 1, 2, 4}, mm(true, true));
}

void shape_cases(Table& t) {
  t.unary("transpose", "2d", {3, 4}, [](const Tensor& x) { return transpose(x); });
  t.unary("transpose", "1xN", {1, 5}, [](const Tensor& x) { return transpose(x); });
  t.unary("transpose", "rank3", {2, 3, 4}, [](const Tensor& x) { return transpose(x); });
  t.unary("transpose", "rank4", {2, 1, 3, 2}, [](const Tensor& x) { return transpose(x); });

  auto perm = [](std::vector<int> p) { return [p](const Tensor& x) { return permute(x, p); }; };
  t.unary("permute", "2d", {2, 3}, perm({1, 0}));
  t.unary("permute", "rank3", {2, 3, 4}, perm({2, 0, 1}));
  t.unary("permute", "rank4", {2, 3, 1, 2}, perm({3, 1, 0, 2}));
  t.unary("permute", "rank4_heads", {2, 3, 2, 2}, perm({0, 2, 1, 3}));

  auto resh = [](std::vector<int64_t> s) { return [s](const Tensor& x) { return reshape(x, s); }; };
  t.unary("reshape", "infer_last", {2, 6}, resh({3, -1}));
  t.unary("reshape", "flatten", {2, 3, 4}, resh({-1}));
  t.unary("reshape", "infer_middle", {2, 3, 2}, resh({2, -1, 3}));
  t.unary("reshape", "to_rank4", {6}, resh({1, 2, 1, 3}));
  t.unary("reshape", "to_rank0", {1}, resh({}));

  auto rp = [](double base, bool inverse) {
    return [base, inverse](const Tensor& x) { return rope(x, base, inverse); };
  };
  t.unary("rope", "2d", {3, 4}, rp(10000.0, false));
  t.unary("rope", "T1_is_identity", {1, 4}, rp(10000.0, false));
  t.unary("rope", "pairs_only", {4, 2}, rp(10000.0, false));
  t.unary("rope", "rank4_heads_base100", {2, 2, 3, 4}, rp(100.0, false));
  t.unary("rope", "inverse_rank3", {2, 3, 4}, rp(10000.0, true));

  // rotary on (..., T, H, d) with tables of angles t theta_i (theta_i = 10^(-2i/d)) and, to see
  // that cos and sin are read as given, tables of arbitrary values.
  auto tables = [](int64_t T, int64_t half, bool rotation) {
    std::vector<double> c(T * half), s(T * half);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(t) * std::pow(10.0, -2.0 * i / (2 * half));
        c[t * half + i] = rotation ? std::cos(a) : 0.3 + 0.1 * t - 0.2 * i;
        s[t * half + i] = rotation ? std::sin(a) : -0.7 + 0.05 * t * i;
      }
    return std::pair{from_vector(c, {T, half}, Dtype::f64), from_vector(s, {T, half}, Dtype::f64)};
  };
  auto rot = [tables](int64_t T, int64_t half, bool rotation) {
    const auto [c, s] = tables(T, half, rotation);
    return [c, s](const Tensor& x) { return rotary(x, as(c, x), as(s, x)); };
  };
  t.unary("rotary", "rank3", {3, 2, 4}, rot(3, 2, true));
  t.unary("rotary", "rank4_batch", {2, 4, 3, 6}, rot(4, 3, true));
  t.unary("rotary", "one_pair_one_head", {5, 1, 2}, rot(5, 1, true));
  t.unary("rotary", "T1", {2, 1, 2, 4}, rot(1, 2, true));
  t.unary("rotary", "arbitrary_tables", {2, 3, 2, 4}, rot(3, 2, false));

  t.unary("scale", "2d", {2, 3}, [](const Tensor& x) { return scale(x, 0.5); });
  t.unary("scale", "rank4_negative", {1, 2, 2, 3}, [](const Tensor& x) { return scale(x, -3.0); });
  t.unary("scale", "rank0", {}, [](const Tensor& x) { return scale(x, 2.5); });

  auto bto = [](Shape s) { return [s](const Tensor& x) { return broadcast_to(x, s); }; };
  t.unary("broadcast_to", "row_to_2d", {3}, bto({2, 3}));
  t.unary("broadcast_to", "middle_axis", {2, 1, 3}, bto({2, 4, 3}));
  t.unary("broadcast_to", "scalar", {}, bto({2, 2}));
  t.unary("broadcast_to", "rank4", {1, 3, 1}, bto({2, 2, 3, 2}));
  t.unary("broadcast_to", "same_shape", {2, 3}, bto({2, 3}));

  auto sto = [](Shape s) { return [s](const Tensor& x) { return sum_to(x, s); }; };
  t.unary("sum_to", "leading_axis", {2, 3}, sto({3}));
  t.unary("sum_to", "middle_axis", {2, 4, 3}, sto({2, 1, 3}));
  t.unary("sum_to", "last_axis", {3, 4}, sto({3, 1}));
  t.unary("sum_to", "scalar", {2, 3}, sto({}));
  t.unary("sum_to", "rank4", {2, 3, 4, 2}, sto({3, 1, 2}));
}

void reduction_cases(Table& t) {
  t.unary("sum", "all", {3, 4}, [](const Tensor& x) { return sum(x); });
  t.unary("sum", "all_rank0", {}, [](const Tensor& x) { return sum(x); });
  t.unary("sum", "axis0", {3, 4}, [](const Tensor& x) { return sum(x, 0); });
  t.unary("sum", "axis1_keepdim", {3, 4}, [](const Tensor& x) { return sum(x, 1, true); });
  t.unary("sum", "axis_minus1_rank3", {2, 3, 4}, [](const Tensor& x) { return sum(x, -1); });
  t.unary("sum", "axis_minus3_keepdim_rank4", {2, 3, 1, 2},
          [](const Tensor& x) { return sum(x, -3, true); });
  t.unary("sum", "rank1_to_rank0", {5}, [](const Tensor& x) { return sum(x, 0); });

  t.unary("sum_of_squares", "2d", {3, 4}, [](const Tensor& x) { return sum_of_squares(x); });
  t.unary("sum_of_squares", "rank0", {}, [](const Tensor& x) { return sum_of_squares(x); });
  t.unary("sum_of_squares", "1xN", {1, 5}, [](const Tensor& x) { return sum_of_squares(x); });
  t.unary("sum_of_squares", "rank4", {2, 1, 2, 2},
          [](const Tensor& x) { return sum_of_squares(x); });
}

void elementwise_cases(Table& t) {
  const std::pair<const char*, Fn2> ops[] = {{"add", [](auto& a, auto& b) { return add(a, b); }},
                                             {"sub", [](auto& a, auto& b) { return sub(a, b); }},
                                             {"mul", [](auto& a, auto& b) { return mul(a, b); }}};
  for (const auto& [op, f] : ops) {
    t.binary(op, "same_shape", {2, 3}, {2, 3}, f);
    t.binary(op, "broadcast_second", {2, 3}, {3}, f);
    t.binary(op, "broadcast_first", {3}, {2, 3}, f);
    t.binary(op, "broadcast_both", {2, 1, 3}, {4, 1}, f);
    t.binary(op, "outer_Nx1_1xN", {3, 1}, {1, 4}, f);
    t.binary(op, "scalar_second", {2, 3}, {}, f);
    t.binary(op, "scalar_first", {}, {2, 3}, f);
    t.binary(op, "rank4_broadcast_both", {2, 1, 3, 1}, {1, 2, 1, 2}, f);
  }
  // Fan-in: one input feeds both operands, so its gradients from each must add up.
  t.unary("mul", "same_input_twice", {2, 3}, [](const Tensor& x) { return mul(x, x); });
  t.unary("sub", "same_input_twice", {2, 3}, [](const Tensor& x) { return sub(x, scale(x, 3.0)); });
}

// A (T, T) mask: 0 where allowed, -inf where masked; the rows listed are masked entirely.
Tensor mask_with_dead_rows(const Tensor& base, const std::vector<int64_t>& dead_rows) {
  std::vector<double> m = base.to_vector();
  const int64_t n = base.size(-1);
  for (int64_t r : dead_rows)
    for (int64_t j = 0; j < n; ++j) m[r * n + j] = -kInf;
  return from_vector(m, base.shape(), Dtype::f64);
}

void mask_and_softmax_cases(Table& t) {
  auto masked_softmax = [](Tensor M) {
    return [M](const Tensor& x) { return softmax(add_mask(x, as(M, x))); };
  };
  auto masked = [](Tensor M) { return [M](const Tensor& x) { return add_mask(x, as(M, x)); }; };

  // add_mask alone returns -inf where masked, where central differences are NaN, so -inf masks
  // are checked through the softmax that follows them in attention.
  const Tensor finite = from_vector({0, -1.5, -3, 0, 0, -0.5, 2, 0, 0}, {3, 3}, Dtype::f64);
  t.unary("add_mask", "finite_mask_rank3", {2, 3, 3}, masked(finite));
  t.unary("add_mask", "T1_causal", {2, 1, 1}, masked(causal_mask(1)));
  t.unary("add_mask", "causal_then_softmax", {4, 4}, masked_softmax(causal_mask(4)));
  t.unary("add_mask", "window2_then_softmax", {1, 5, 5},
          masked_softmax(causal_mask(5, Dtype::f64, 2)));
  t.unary("add_mask", "rank4_window_then_softmax", {2, 2, 3, 3},
          masked_softmax(causal_mask(3, Dtype::f64, 2)));
  t.unary("add_mask", "fully_masked_row_then_softmax", {2, 3, 3},
          masked_softmax(mask_with_dead_rows(causal_mask(3), {0})));

  auto sm = [](const Tensor& x) { return softmax(x); };
  t.unary("softmax", "1xN", {1, 5}, sm);
  // A single column's softmax is the constant 1, so its gradient must be exactly zero; times x
  // keeps the case non-vacuous while still checking that zero.
  t.unary("softmax", "Nx1_times_x", {5, 1}, [](const Tensor& x) { return mul(softmax(x), x); });
  t.unary("softmax", "non_square", {3, 5}, sm);
  t.unary("softmax", "rank3", {2, 3, 4}, sm);
  t.unary("softmax", "rank4", {2, 2, 2, 3}, sm);
  t.add_inputs("softmax", "logits_1e4",
               {from_vector({1e4, 1e4 - 0.7, -1e4, 1e4 + 0.3,  //
                             -1e4, -1e4 + 1.2, -1e4 - 0.4, -1e4 + 0.1},
                            {2, 4}, Dtype::f64)},
               [](const std::vector<Tensor>& x) { return std::vector<Tensor>{softmax(x[0])}; });
  t.unary("softmax", "causal_masked", {4, 4}, masked_softmax(causal_mask(4)));
  const Tensor partial =
      from_vector({0, -kInf, 0, 0, -kInf, -kInf, -kInf, -kInf, 0, 0, -kInf, 0}, {3, 4},
                  Dtype::f64);
  t.unary("softmax", "fully_masked_row", {3, 4}, masked_softmax(partial));
}

// Causal self-attention from ops, as in the lesson: Y = softmax(Q K^T / sqrt(d_k) + M) V, the
// library's composed model (nn/, need_weights).
Tensor attention(const Tensor& X, const Tensor& W_Q, const Tensor& W_K, const Tensor& W_V) {
  return single_head_attention(X, W_Q, W_K, W_V, Tensor(), {.need_weights = true}).Y;
}

void causal_attention_cases(Table& t) {
  auto fused = [](double sc, int64_t window, int64_t query_offset = 0) {
    return [sc, window, query_offset](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{causal_attention(x[0], x[1], x[2], sc, window, query_offset)};
    };
  };
  // No room to keep the weights while it lives: the backward recomputes them from lse.
  struct NoKeptWeights {
    std::size_t saved = detail::attention_weights_limit();
    NoKeptWeights() { detail::set_attention_weights_limit(0); }
    ~NoKeptWeights() { detail::set_attention_weights_limit(saved); }
  };
  // The same op with no room to keep the weights.
  auto recomputing = [](double sc, int64_t window, int64_t query_offset = 0) {
    return [sc, window, query_offset](const std::vector<Tensor>& x) {
      NoKeptWeights limit;
      return std::vector<Tensor>{causal_attention(x[0], x[1], x[2], sc, window, query_offset)};
    };
  };
  t.add("causal_attention", "single_head", {{4, 3}, {4, 3}, {4, 2}}, fused(1 / std::sqrt(3.0), 0));
  t.add("causal_attention", "single_head_weights_recomputed", {{4, 3}, {4, 3}, {4, 2}},
        recomputing(1 / std::sqrt(3.0), 0));
  t.add("causal_attention", "rank4_window2_weights_recomputed",
        {{2, 1, 3, 2}, {2, 1, 3, 2}, {2, 1, 3, 1}}, recomputing(0.6, 2));
  // T = 1: the weights are [[1]], so only V gets a gradient.
  t.add("causal_attention", "T1", {{1, 2}, {1, 2}, {1, 3}}, fused(0.7, 0));
  // Two (batch, head) entries: kept tiny, as each call over several entries starts an OpenMP
  // parallel region, which costs milliseconds on a busy machine.
  t.add("causal_attention", "rank4_two_entries_window2", {{2, 1, 3, 2}, {2, 1, 3, 2}, {2, 1, 3, 1}},
        fused(1 / std::sqrt(2.0), 2));
  // Window 1: each row sees only itself, O = V.
  t.add("causal_attention", "rank3_window1", {{1, 3, 2}, {1, 3, 2}, {1, 3, 2}}, fused(1.0, 1));
  // More than one 64-row block; with T = 130 and a window of 3 whole key blocks are skipped. A
  // full Jacobian costs O(T^3) here, so these two compare random projections (fast mode); the
  // small cases above check every entry.
  GradcheckOptions fast = tol();
  fast.fast_mode = true;
  t.add("causal_attention", "T70_two_blocks", {{70, 2}, {70, 2}, {70, 1}}, fused(0.5, 0), fast);
  t.add("causal_attention", "T130_window3_skips_blocks", {{130, 1}, {130, 1}, {130, 1}},
        fused(1.0, 3), fast);
  t.add("causal_attention", "T70_weights_recomputed", {{70, 2}, {70, 2}, {70, 1}},
        recomputing(0.5, 0), fast);
  // Queries after cached keys, as generation with a KV cache asks: K and V have query_offset
  // more rows than Q, and query i is position query_offset + i.
  t.add("causal_attention", "query_offset3", {{2, 3}, {5, 3}, {5, 2}}, fused(0.7, 0, 3));
  t.add("causal_attention", "T1_after_4_window2", {{2, 1, 2}, {2, 5, 2}, {2, 5, 3}},
        fused(0.8, 2, 4));
  t.add("causal_attention", "query_offset2_weights_recomputed", {{3, 2}, {5, 2}, {5, 2}},
        recomputing(0.6, 0, 2));
  t.add("causal_attention", "T70_after_30_two_blocks", {{70, 2}, {100, 2}, {100, 1}},
        fused(0.5, 0, 30), fast);
  t.add("causal_attention", "T70_after_60_window3_skips", {{70, 1}, {130, 1}, {130, 1}},
        fused(1.0, 3, 60), fast);
  // Heads packed along the last axis, read in place.
  auto packed = [](int64_t heads, double sc, int64_t window, int64_t query_offset = 0) {
    return [heads, sc, window, query_offset](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{
          causal_attention_heads(x[0], x[1], x[2], heads, sc, window, query_offset)};
    };
  };
  t.add("causal_attention_heads", "two_heads_batched", {{2, 3, 4}, {2, 3, 4}, {2, 3, 6}},
        packed(2, 0.7, 0));
  t.add("causal_attention_heads", "three_heads_2d_window2", {{4, 3}, {4, 3}, {4, 3}},
        packed(3, 1.0, 2));
  t.add("causal_attention_heads", "one_head", {{3, 2}, {3, 2}, {3, 1}}, packed(1, 0.5, 0));
  t.add("causal_attention_heads", "T70_two_heads_two_blocks", {{70, 2}, {70, 2}, {70, 4}},
        packed(2, 0.6, 0), fast);
  t.add("causal_attention_heads", "composed_reference", {{2, 3, 4}, {2, 3, 4}, {2, 3, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{causal_attention_heads_composed(x[0], x[1], x[2], 2, 0.8, 1)};
        });
  t.add("causal_attention_heads", "two_heads_after_2_cached", {{2, 2, 4}, {2, 4, 4}, {2, 4, 6}},
        packed(2, 0.7, 0, 2));
  t.add("causal_attention_heads", "composed_reference_offset3",
        {{1, 2, 4}, {1, 5, 4}, {1, 5, 2}}, [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{
              causal_attention_heads_composed(x[0], x[1], x[2], 2, 0.8, 2, 3)};
        });
  // Q, K and V read in place from one packed projection (..., T, 3 H d), one gradient written.
  auto qkv = [](int64_t heads, double sc, int64_t window) {
    return [heads, sc, window](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{causal_attention_qkv(x[0], heads, sc, window)};
    };
  };
  t.add("causal_attention_qkv", "two_heads_batched", {{2, 3, 12}}, qkv(2, 0.7, 0));
  t.add("causal_attention_qkv", "three_heads_2d_window2", {{4, 9}}, qkv(3, 1.0, 2));
  t.add("causal_attention_qkv", "one_head_T1", {{1, 6}}, qkv(1, 0.5, 0));
  t.add("causal_attention_qkv", "T70_two_heads_two_blocks", {{70, 12}}, qkv(2, 0.6, 0), fast);
  t.add("causal_attention_qkv", "T70_weights_recomputed", {{2, 70, 6}},
        [](const std::vector<Tensor>& x) {
          NoKeptWeights limit;
          return std::vector<Tensor>{causal_attention_qkv(x[0], 1, 0.5)};
        },
        fast);
  t.add("causal_attention", "composed_reference", {{2, 3, 2}, {2, 3, 2}, {2, 3, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{causal_attention_composed(x[0], x[1], x[2], 0.8, 2)};
        });
  t.add("causal_attention", "composed_reference_offset3", {{2, 2}, {5, 2}, {5, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{causal_attention_composed(x[0], x[1], x[2], 0.8, 2, 3)};
        });
}

void composed_cases(Table& t) {
  auto single = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{attention(x[0], x[1], x[2], x[3])};
  };
  t.add("attention", "single_head_T4", {{4, 3}, {3, 2}, {3, 2}, {3, 2}}, single);
  // T = 1: the weights are [[1]], so dY/dW_Q = dY/dW_K = 0 while X and W_V still get gradients.
  t.add("attention", "single_head_T1", {{1, 3}, {3, 2}, {3, 2}, {3, 2}}, single);
  // Two heads over (B, T, D) = (2, 3, 4) in the nanoGPT layout, reduced with fixed weights.
  const Tensor R = weights({2, 3, 4}, 7);
  t.add("attention", "two_heads_weighted_loss", {{2, 3, 4}, {4, 4}, {4, 4}, {4, 4}},
        [R](const std::vector<Tensor>& x) {
          const AttentionOptions two_heads{.heads = 2, .need_weights = true};
          const Tensor Y = multi_head_attention(x[0], x[1], x[2], x[3], Tensor(), two_heads).Y;
          return std::vector<Tensor>{sum(mul(Y, as(R, Y)))};  // Y (B, T, D)
        });
  t.add("attention", "lesson_loss_half_sum_of_squares", {{3, 2}, {2, 2}, {2, 2}, {2, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{scale(sum_of_squares(attention(x[0], x[1], x[2], x[3])), 0.5)};
        });
}

}  // namespace

std::vector<OpCase> op_cases() {
  Table t;
  matmul_cases(t);
  shape_cases(t);
  reduction_cases(t);
  elementwise_cases(t);
  mask_and_softmax_cases(t);
  causal_attention_cases(t);
  composed_cases(t);
  training_op_cases(t);
  index_op_cases(t);
  conv_op_cases(t);
  norm_op_cases(t);
  dims_op_cases(t);
  elementwise_op_cases(t);
  loss_op_cases(t);
  reduction_op_cases(t);
  shape_op_cases(t);
  rank_op_cases(t);
  return t.take();
}

}  // namespace tg
