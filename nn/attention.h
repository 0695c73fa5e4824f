#pragma once
// Causal self-attention built only from ops (the tape differentiates it; no hand-written
// backward). Shapes as in the lesson: X (T, D) or (B, T, D); W_Q, W_K (D, d_k); W_V (D, d_v);
// optional W_O (d_v, d_v).
//
//   single head:  Q = X W_Q, K = X W_K, V = X W_V
//                 S = Q K^T / sqrt(d_k) + M,  A = softmax(S),  Y = A V  (then Y W_O)
//   multi-head:   head h takes columns [h d_k/H, (h+1) d_k/H) of Q and K and likewise of V
//                 (nanoGPT layout), scores scaled by 1/sqrt(d_k/H), heads run as batched
//                 matmuls on (B, H, T, d_h), outputs concatenated to (B, T, d_v), times W_O.
// M is the causal mask (j <= i), or a sliding window of width w (i - w < j <= i). RoPE, when on,
// rotates Q and K per head before the scores.

#include <cstdint>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/nn/module.h>

namespace tg {

struct AttentionOptions {
  int64_t heads = 1;
  int64_t window = 0;  // 0: plain causal; w >= 1: causal sliding window of w positions
  bool scale = true;   // false drops 1/sqrt(d), the lesson's exercise (d)
  bool rope = false;
  double rope_base = 10000.0;
  /// false (the default): the fused causal_attention op, O(T d) memory and faster; S and A are
  /// left undefined. true: the composed ops (causal_attention_weights), with the scores S and
  /// the weights A on the tape and returned (as in the lesson, the demo and the checker).
  bool need_weights = false;
};

/// What an attention function computed, for the caller and the invariant checker. Q, K, V are
/// per head, (B, H, T, d_h) (or (H, T, d_h) for a 2-D X), when heads > 1, else (.., T, d).
/// S and A are (T, T) or (B, T, T) for one head, (H, T, T) or (B, H, T, T) for several.
struct AttentionOutput {
  Tensor Y;    // (T, d_v) or (B, T, d_v)
  Tensor A;    // the attention weights (undefined when options.need_weights is false)
  Tensor S;    // the scores Q K^T / sqrt(d_h) before the mask (likewise)
  // The projections. Per head, (H, T, d_h) or (B, H, T, d_h) (single-head: (.., T, d)); but
  // packed, (.., T, H d_h), from multi_head_attention with need_weights = false and no RoPE,
  // where the fused op reads the heads in place.
  Tensor Q, K, V;
  Tensor W_O;  // the output projection used, undefined when none
};

/// Single-head causal self-attention (W_O may be undefined). Throws ShapeError for shapes that
/// do not fit (the message names the model and every shape), ValueError for a bad option.
AttentionOutput single_head_attention(const Tensor& X, const Tensor& W_Q, const Tensor& W_K,
                                      const Tensor& W_V, const Tensor& W_O = Tensor(),
                                      const AttentionOptions& options = {});

/// Multi-head causal self-attention with options.heads heads, which must divide d_k and d_v.
/// Throws like single_head_attention.
AttentionOutput multi_head_attention(const Tensor& X, const Tensor& W_Q, const Tensor& W_K,
                                     const Tensor& W_V, const Tensor& W_O,
                                     const AttentionOptions& options);

/// The loss the tools use: L = 0.5 * sum(Y^2).
Tensor attention_loss(const Tensor& Y);

namespace nn {

/// The lesson's causal self-attention as a layer: parameters W_Q, W_K (D, d_k), W_V (D, d_v)
/// and, with output_proj, W_O (d_v, d_v), registered under those names. (nanoGPT's layer, with
/// one fused c_attn projection, is nn::CausalSelfAttention in nn/gpt.h.)
class QKVAttention : public Module {
 public:
  /// Weights drawn from N(0, init_std^2) (the lesson uses 0.1); W_O only when output_proj. The
  /// options default to the fused path; set options.need_weights for A. Throws ValueError when
  /// heads does not divide d_k and d_v, or for a bad option.
  QKVAttention(int64_t D, int64_t d_k, int64_t d_v, const AttentionOptions& options,
               bool output_proj, Rng& rng, Dtype dtype = get_default_dtype(),
               double init_std = 0.1);

  /// single_head_attention when options.heads == 1, else multi_head_attention.
  AttentionOutput forward(const Tensor& X) const;

  Tensor W_Q, W_K, W_V, W_O;
  AttentionOptions options;
};

}  // namespace nn

}  // namespace tg
