#pragma once
// The fused causal attention's kernels (internal, not installed): raw buffers in and out, no
// Tensor and no tape; the ops around them are in ops/causal_attention.cpp. Per (batch, head)
// entry and per block of 64 query rows i, against the keys [lo, hi) the block sees:
//   forward:  S = Q_i K_lo:hi^T scale + M;  m = rowmax S;  l = rowsum exp(S - m)
//             P = exp(S - m) / l;  O_i = P V_lo:hi;  lse_i = m + log l
//             (kept: lse, and the blocks of P while they fit in attention_weights_limit())
//   backward, with D_i = rowsum(P * dP) (= rowsum(dO_i * O_i): the block holds every key its
//   rows see) and P kept or recomputed as exp(S - lse_i):
//             dV_lo:hi += P^T dO_i;  dP = dO_i V_lo:hi^T;  dS = P * (dP - D_i) scale
//             dQ_i = dS K_lo:hi;  dK_lo:hi += dS^T Q_i
//   tangent (forward mode), from the inputs' tangents tQ, tK, tV (each may be absent: zero),
//   with the forward in one pass (each block's P made once for both):
//             tS = (tQ_i K_lo:hi^T + Q_i tK_lo:hi^T) scale;  tA = P * (tS - rowsum(tS * P))
//             tO_i = tA V_lo:hi + P tV_lo:hi
// M is causal with the queries at positions query_offset + i (the last T of T_k positions, as
// in generation with a KV cache): query i sees keys j <= query_offset + i, and with a window w
// only j > query_offset + i - w. A block's scores take (64, T_k) scratch per thread, so memory
// stays O(T d) per head. Masked blocks are skipped whole. In the forward and the backward a
// block's products run by chunks of 32 rows, each over the keys up to its last row's, so the
// keys after a chunk's rows are not computed; the entries computed and then zeroed are those of
// the diagonal chunks, the keys left of a window's edge (a chunk starts at its block's first
// key), and a block of more than 256 keys, which runs as one product. The dual pass chunks its
// scores only. Row i always sees itself, so l > 0 and lse is finite.

#include <cstddef>
#include <cstdint>

namespace tg::detail {

/// Where the entries of one call live, and which keys each query sees. N entries (batch x
/// heads); each has T query rows and T_k = query_offset + T key and value rows, Q and K rows of
/// d values and V and O rows of dv, with row strides ldq (Q and K), ldv (V) and ldo (O): d, dv
/// and dv for (..., T, d) operands; H d, H dv and H dv when H heads are packed along the last
/// axis; 3 H d, 3 H d and H d when Q, K and V are read from one (..., T, 3 H d) projection, K
/// starting at column k_col = H d and V at v_col = 2 H d. Entry n = b H + h starts at row b T
/// (b T_k for K and V), column h d (plus k_col, v_col). The gradients dQ, dK, dV share their
/// inputs' layout, dO the output's.
struct AttentionDims {
  int64_t N = 0, T = 0, T_k = 0, d = 0, dv = 0, H = 1;
  int64_t ldq = 0, ldv = 0, ldo = 0, k_col = 0, v_col = 0;
  int64_t window = 0;        // 0: plain causal; w >= 1: the w positions up to the query's own
  int64_t query_offset = 0;  // query row i is position query_offset + i
  int64_t q_off(int64_t n) const { return (n / H) * T * ldq + (n % H) * d; }
  int64_t k_off(int64_t n) const { return (n / H) * T_k * ldq + (n % H) * d + k_col; }
  int64_t v_off(int64_t n) const { return (n / H) * T_k * ldv + (n % H) * dv + v_col; }
  int64_t o_off(int64_t n) const { return (n / H) * T * ldo + (n % H) * dv; }
};

/// What the forward keeps for the backward, in one buffer of total(N) elements: the N T row
/// log-sum-exps, then (from a 64-byte boundary) the weights of every entry, per_entry each,
/// block after block, when `weights`; otherwise the backward recomputes them from Q, K and lse.
struct KeptLayout {
  int64_t lse_n = 0;  // N T, rounded up to whole 64-byte lines
  int64_t per_entry = 0;
  bool weights = false;
  int64_t total(int64_t N) const { return lse_n + (weights ? N * per_entry : 0); }
};

/// The kept-weights policy: the weights are kept when a backward is coming and all of them (of
/// elem_size bytes each) fit in attention_weights_limit() bytes. Never throws.
KeptLayout kept_layout(const AttentionDims& s, std::size_t elem_size, bool backward_coming);

/// The three inputs; they may point into one buffer (the packed projection).
template <class T>
struct AttentionInputs {
  const T* q;
  const T* k;
  const T* v;
};

/// The three gradients, every element written (none added): they may point into one buffer.
template <class T>
struct AttentionGrads {
  T* dq;
  T* dk;
  T* dv;
};

/// O of every entry, and in `kept` (total(N) elements laid out by `layout`) what the backward
/// needs. Runs the entries in parallel when the work pays for a thread team; the results do not
/// depend on the thread count. Never throws.
template <class T>
void attention_forward(const AttentionDims& s, T scale, AttentionInputs<T> in, T* o, T* kept,
                       const KeptLayout& layout);

/// dQ, dK, dV of every entry from dO (laid out like O) and what the forward kept (not O
/// itself: each row's dO . O is summed as P . dP). Never throws.
template <class T>
void attention_backward(const AttentionDims& s, T scale, AttentionInputs<T> in, const T* dout,
                        const T* kept, const KeptLayout& layout, AttentionGrads<T> grads);

/// O and tO of every entry in one pass (forward mode, nothing differentiating the rule; no
/// backward follows, so nothing is kept). The tangents are laid out like the inputs (a null
/// pointer: a zero tangent; not all three null), tO like O. O is computed block by block as
/// attention_forward computes it; the results do not depend on the thread count. Never throws.
template <class T>
void attention_forward_tangent(const AttentionDims& s, T scale, AttentionInputs<T> in,
                               AttentionInputs<T> tangents, T* o, T* tout);

}  // namespace tg::detail
