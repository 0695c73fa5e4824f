#pragma once
#include <source_location>
#include <cstddef>
#include <cstdint>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/attention_composed.h>

namespace tg {
/// Fused causal attention: O = softmax(Q K^T * scale + M) V, with M the causal mask (or a sliding
/// window of `window` positions when window > 0), per leading (batch, head) entry. Q is
/// (..., T, d), K (..., T_k, d), V (..., T_k, d_v), all with the same leading axes (rank 2 or
/// more), T_k = query_offset + T: query i is position query_offset + i (0 by default; the new
/// positions after a KV cache's otherwise) and sees the keys up to it. O is (..., T, d_v).
/// Computed for 64 query rows at a time, it never forms the (T, T_k) weights with their masked
/// part; masked blocks are skipped. For its backward (a fused kernel too) it keeps each row's
/// log-sum-exp, and the visible weights only while they fit in detail::attention_weights_limit()
/// bytes (32 MiB): beyond that the backward recomputes them, so memory stays O(T d) for long
/// sequences. Its derivative formula (what create_graph records) recomputes the weights with
/// ops, so grad-of-grad works, with any query_offset. Throws ShapeError (shapes that do not fit),
/// ValueError (dtypes differ, window < 0, query_offset < 0).
Tensor causal_attention(const Tensor& Q, const Tensor& K, const Tensor& V, double scale,
                        int64_t window = 0, int64_t query_offset = 0,
                        const std::source_location& where = std::source_location::current());

/// The same computation from the composed ops (causal_attention_weights, then A V): the
/// reference the fused op is checked against. Throws like causal_attention.
Tensor causal_attention_composed(const Tensor& Q, const Tensor& K, const Tensor& V, double scale,
                                 int64_t window = 0, int64_t query_offset = 0);

/// The same attention for H heads packed along the last axis, as a multi-head layer's
/// projections come: Q is (T, H d) or (B, T, H d), K (..., T_k, H d), V (..., T_k, H d_v), head
/// h owning columns [h d, (h+1) d), T_k = query_offset + T as in causal_attention; O is
/// (..., T, H d_v), head h's output in its columns. The kernels read the heads in place, so no
/// transpose is copied either way. Throws ShapeError (shapes, or heads that do not divide the
/// last axes), ValueError (dtypes differ, heads < 1, window < 0, query_offset < 0).
Tensor causal_attention_heads(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t heads,
                              double scale, int64_t window = 0, int64_t query_offset = 0,
                              const std::source_location& where = std::source_location::current());

/// causal_attention_heads on one packed projection, as a GPT's fused c_attn makes it: QKV is
/// (T, 3 H d) or (B, T, 3 H d), Q, K and V its columns [0, C), [C, 2C) and [2C, 3C) with C = H d
/// (split(QKV, C, -1)), each with H heads packed as in causal_attention_heads; O is (..., T, C).
/// The kernels read Q, K and V in place and the backward writes dQ, dK and dV into one
/// (..., T, 3C) gradient, so no split is copied either way. Throws ShapeError (rank other than 2
/// or 3, last axis not divisible by 3 H), ValueError (not float32 or float64, heads < 1,
/// window < 0).
Tensor causal_attention_qkv(const Tensor& QKV, int64_t heads, double scale, int64_t window = 0,
                            const std::source_location& where = std::source_location::current());

/// causal_attention_heads from the composed ops (split the heads, attend, merge): its reference
/// (checked against it in the tests). Throws like causal_attention_heads.
Tensor causal_attention_heads_composed(const Tensor& Q, const Tensor& K, const Tensor& V,
                                       int64_t heads, double scale, int64_t window = 0,
                                       int64_t query_offset = 0);

namespace detail {
/// The most bytes of attention weights causal_attention keeps for its backward (tests lower it
/// to 0 to exercise the recomputing backward). Applies to every thread. Never throws.
void set_attention_weights_limit(std::size_t bytes);
std::size_t attention_weights_limit();
}  // namespace detail

}  // namespace tg
