#pragma once
// FLOP counts for the benchmarks' FLOP/s counters, all in one place. A multiply-add counts 2.
// Attention has two counts:
// - dense: the score and weight matmuls at full (T, T) size, 2 T^2 D each, as PyTorch's composed
//   path computes them; it is the number to put beside PyTorch's ("FLOP/s").
// - useful: only the entries the causal mask leaves, T (T + 1) / 2 of the T^2, which is all the
//   fused op computes, and no gradient for X (the benchmarks' X is data); it is the number to
//   hold against the machine's GEMM peak (BM_Gemm_Peak), so "percent of peak" means work that
//   had to be done ("useful FLOP/s").

#include <cstdint>

namespace tg::bench {

/// (M, K) @ (K, N).
inline double matmul_flops(int64_t M, int64_t K, int64_t N) { return 2.0 * M * K * N; }

/// The share of a (T, T) score matrix a causal mask leaves: rows see 1, 2, ..., T keys.
inline double causal_fraction(int64_t T) { return (T + 1.0) / (2.0 * T); }

/// X (B, T, D) through W_Q, W_K, W_V, W_O (D, D): 4 projections, scores Q K^T and A V, dense.
inline double attention_fwd_flops(int64_t B, int64_t T, int64_t D) {
  const double b = B, t = T, d = D;
  return 4 * 2 * b * t * d * d + 2 * 2 * b * t * t * d;
}

/// Backward needs two matmuls per forward matmul: about twice the forward.
inline double attention_fwdbwd_flops(int64_t B, int64_t T, int64_t D) {
  return 3 * attention_fwd_flops(B, T, D);
}

/// attention_fwd_flops with the score and weight products cut to the causal triangle.
inline double attention_fwd_useful_flops(int64_t B, int64_t T, int64_t D) {
  const double b = B, t = T, d = D;
  return 4 * 2 * b * t * d * d + 2 * 2 * b * t * t * d * causal_fraction(T);
}

/// What a forward+backward into the weights must compute, X being data (no dX, as in the
/// benchmarks): the forward; dW_Q, dW_K, dW_V (one product each), dW_O and d(A V) (two); and for
/// the attention core dA = dY V^T, dV = A^T dY, dQ = dS K, dK = dS^T Q on the causal triangle.
/// Lower than 3 x forward, which also counts dX.
inline double attention_fwdbwd_useful_flops(int64_t B, int64_t T, int64_t D) {
  const double b = B, t = T, d = D;
  return (4 + 5) * 2 * b * t * d * d + (2 + 4) * 2 * b * t * t * d * causal_fraction(T);
}

/// conv2d's forward: every output entry (N, C_out, H_out, W_out) is a dot product of
/// C_in / groups * kH * kW taps. Its backward (dX and dW, one product each) is twice that.
inline double conv2d_fwd_flops(int64_t N, int64_t C_out, int64_t H_out, int64_t W_out,
                               int64_t C_in_per_group, int64_t kH, int64_t kW) {
  return 2.0 * N * C_out * H_out * W_out * C_in_per_group * kH * kW;
}

/// nanoGPT's parameter count N for its FLOP estimate (get_num_params(non_embedding=True)):
/// every parameter but the position embedding; wte counts, since it is also the output head.
/// Per layer: ln_1, ln_2 (2C each), c_attn (3C^2 + 3C), attn.c_proj (C^2 + C), mlp.c_fc
/// (4C^2 + 4C), mlp.c_proj (4C^2 + C); then ln_f (2C) and wte (V C). With biases.
inline double gpt_params_nonembedding(int64_t V, int64_t L, int64_t C) {
  const double c = C;
  return L * (12 * c * c + 13 * c) + 2 * c + double(V) * c;
}

/// One training step's FLOPs per token, as nanoGPT's estimate_mfu (PaLM, appendix B):
/// 6 N (forward 2 N, backward 4 N through the weights) plus 12 L C T for attention (scores and
/// weights, forward and backward, at full T x T: the causal mask halves what is really needed).
/// LayerNorm, gelu, softmax and the optimizer are not counted (O(N) or O(T C), not O(N T)).
inline double gpt_train_flops_per_token(int64_t V, int64_t L, int64_t C, int64_t T) {
  return 6 * gpt_params_nonembedding(V, L, C) + 12.0 * L * C * T;
}

/// What one training step must compute per token, to hold against the GEMM peak ("useful"): the
/// Linears' products (c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj: 12 C^2 multiply-adds a layer,
/// and the lm_head's V C), forward, dX and dW, 3 x 2 FLOPs each; and attention's two products
/// forward and four backward over the keys the causal mask leaves, (T + 1) / 2 on average, across
/// all heads: 6 C (T + 1) a layer. Biases, LayerNorm, gelu, softmax, the loss and AdamW are not
/// counted, nor the embeddings' gradients (sums of rows). About nanoGPT's estimate less half of
/// its attention term.
inline double gpt_train_useful_flops_per_token(int64_t V, int64_t L, int64_t C, int64_t T) {
  const double c = C;
  return 6 * (L * 12 * c * c + double(V) * c) + 6.0 * L * c * (T + 1.0);
}

/// The same estimate for a Llama (nn/llama.h): N is every parameter but the embedding table's
/// (q and o C x C, k and v C x C H_kv / H, the MLP's three C x I, two RMSNorm weights a layer,
/// the final norm, lm_head V x C), plus 12 L C T for attention.
inline double llama_train_flops_per_token(int64_t V, int64_t L, int64_t C, int64_t I, int64_t H,
                                          int64_t KV, int64_t T) {
  const double c = C, kv = double(C) * double(KV) / double(H);
  const double per_layer = 2 * c * c + 2 * c * kv + 3 * c * double(I) + 2 * c;
  return 6 * (L * per_layer + c + double(V) * c) + 12.0 * L * C * T;
}

/// An LSTM layer over T steps of B sequences, input I, hidden H: per step the gate products
/// x W_ih^T (B, I) @ (I, 4H) and h W_hh^T (B, H) @ (H, 4H). Forward + backward (the gradients of
/// x, h and both weights, two products per forward product) is 3 x that; the elementwise gate
/// math is O(B H) per step and not counted.
inline double lstm_fwdbwd_flops(int64_t B, int64_t T, int64_t I, int64_t H) {
  return 3 * double(T) * (matmul_flops(B, I, 4 * H) + matmul_flops(B, H, 4 * H));
}
/// The same for a GRU layer (3 gates).
inline double gru_fwdbwd_flops(int64_t B, int64_t T, int64_t I, int64_t H) {
  return 3 * double(T) * (matmul_flops(B, I, 3 * H) + matmul_flops(B, H, 3 * H));
}

/// pytorch/examples' MNIST Net's training step on N images of 28 x 28: conv1 (1 -> 32, 3 x 3, to
/// 26 x 26) forward and its weights' gradient (the images are data: no dX); conv2 (32 -> 64, to
/// 24 x 24) and fc1 (9216 -> 128) and fc2 (128 -> 10) forward, dX and dW. Direct convolution's
/// count (Winograd computes fewer multiplications for the same result); pooling, activations,
/// the loss and AdamW are O(N) and not counted.
inline double mnist_net_train_flops(int64_t N) {
  return 2 * conv2d_fwd_flops(N, 32, 26, 26, 1, 3, 3) +
         3 * conv2d_fwd_flops(N, 64, 24, 24, 32, 3, 3) +
         3 * (matmul_flops(N, 9216, 128) + matmul_flops(N, 128, 10));
}

}  // namespace tg::bench
