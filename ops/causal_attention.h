#pragma once
#include <source_location>
#include <cstdint>

#include "autograd/tensor.h"

namespace tg {
/// Fused causal attention: O = softmax(Q K^T * scale + M) V, with M the causal mask (or a sliding
/// window of `window` positions when window > 0), per leading (batch, head) entry. Q, K are
/// (..., T, d), V is (..., T, d_v), all with the same leading axes (rank 2 to 4); O is
/// (..., T, d_v). Computed block by block with an online softmax, it never holds the (T, T)
/// weights: it saves only each row's log-sum-exp and recomputes the weights in backward, so its
/// memory is O(T d). Masked blocks are skipped. Its backward is a fused kernel too; under
/// create_graph it falls back to the composed ops, so grad-of-grad still works. Throws
/// ShapeError (shapes that do not fit), ValueError (dtypes differ, window < 0).
Tensor causal_attention(const Tensor& Q, const Tensor& K, const Tensor& V, double scale,
                        int64_t window = 0, const std::source_location& where = std::source_location::current());

/// The same computation from the composed ops (matmul, scale, add_mask, softmax, matmul): the
/// reference the fused op is checked against, and its create_graph fallback.
Tensor causal_attention_composed(const Tensor& Q, const Tensor& K, const Tensor& V, double scale,
                                 int64_t window = 0);

/// Threads for the parallel kernels (OpenMP over batch x heads and inside large GEMMs); results
/// do not depend on it. Throws ValueError for n < 1.
void set_num_threads(int n);
int num_threads();
}  // namespace tg
