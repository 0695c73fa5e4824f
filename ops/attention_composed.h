#pragma once
// Causal attention from composed ops, the one copy every caller uses: nn/'s attention with
// need_weights (the lesson's, the demo's and the checker's), the composed references of the
// fused ops, and the fused ops' derivative formulas (which recompute the weights with it).
//   S = Q K^T scale;  A = softmax(S + M);  then O = A V
// M is causal with the queries at positions query_offset + i (the last T of T_k positions):
// query i sees keys j <= query_offset + i, and with a window w only j > query_offset + i - w.
// Heads move between the packed layout (..., T, H d), head h in columns [h d, (h+1) d) as
// nanoGPT's projections make them, and entries of their own (B, H, T, d).

#include <cstdint>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// What causal_attention_weights forms, both (.., T, T_k) and on the tape.
struct AttentionWeights {
  Tensor S;  // Q K^T scale, before the mask
  Tensor A;  // softmax(S + M): rows sum to 1, exactly 0 where masked
};

/// S and A of causal attention for Q (.., T, d) and K (.., T_k, d), T_k = query_offset + T.
/// Throws ShapeError (Q and K do not fit together or with the mask), ValueError (dtypes differ,
/// window < 0, query_offset < 0).
AttentionWeights causal_attention_weights(const Tensor& Q, const Tensor& K, double scale,
                                          int64_t window = 0, int64_t query_offset = 0);

/// (B, T, H d) -> (B, H, T, d), or (T, H d) -> (1, H, T, d): head h's columns as an entry of its
/// own (a copy). Throws ShapeError when P is not rank 2 or 3 or heads does not divide its last
/// axis, ValueError when heads < 1.
Tensor split_heads(const Tensor& P, int64_t heads);

/// split_heads undone: (B, H, T, d) -> (B, T, H d), or (1, H, T, d) -> (T, H d) when not
/// `batched`. Throws ShapeError when P is not rank 4 (or its B is not 1 when not batched).
Tensor merge_heads(const Tensor& P, bool batched = true);

}  // namespace tg
