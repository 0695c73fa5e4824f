#pragma once
// FLOP counts for the benchmarks' FLOP/s counters, all in one place. A multiply-add counts 2.
// Attention counts dense score and weight matmuls (2 T^2 D each), as PyTorch's composed path
// computes them, even though the fused op skips the masked half.

#include <cstdint>

namespace tg::bench {

/// X (B, T, D) through W_Q, W_K, W_V, W_O (D, D): 4 projections, scores Q K^T and A V.
inline double attention_fwd_flops(int64_t B, int64_t T, int64_t D) {
  const double b = B, t = T, d = D;
  return 4 * 2 * b * t * d * d + 2 * 2 * b * t * t * d;
}

/// Backward needs two matmuls per forward matmul: about twice the forward.
inline double attention_fwdbwd_flops(int64_t B, int64_t T, int64_t D) {
  return 3 * attention_fwd_flops(B, T, D);
}

/// (M, K) @ (K, N).
inline double matmul_flops(int64_t M, int64_t K, int64_t N) { return 2.0 * M * K * N; }

}  // namespace tg::bench
