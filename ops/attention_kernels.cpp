// The fused causal attention's kernels; the math is at the top of ops/attention_kernels.h.

#include <tapegrad/ops/attention_kernels.h>

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include <tapegrad/ops/causal_attention.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/panel_kernel.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

namespace {

constexpr int64_t kBlock = 64;

// Runs body(n) for n in [0, N): in parallel over OpenMP threads when the work (about
// N T T_k d multiply-adds) pays for starting a thread team, directly otherwise. Each entry is
// computed the same way either way, so results do not depend on the thread count.
template <class F>
void for_each_entry(int64_t N, int64_t work, F&& body) {
  if (N == 1 || work < (int64_t{1} << 18)) {
    for (int64_t n = 0; n < N; ++n) body(n);
    return;
  }
  const int team = team_size();
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int64_t n = 0; n < N; ++n) body(n);
}

int64_t work_of(const AttentionDims& s) { return s.N * s.T * s.T_k * (s.d + s.dv); }

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Query rows [i0, i0 + rows) and the keys [lo, lo + keys) they see: up to the last row's
// position (causal), from the first row's window edge.
struct Block {
  int64_t i0, rows, lo, keys;
};

Block block_at(const AttentionDims& s, int64_t i0) {
  const int64_t i1 = std::min(s.T, i0 + kBlock);
  const int64_t hi = s.query_offset + i1;
  const int64_t lo =
      s.window > 0 ? std::max<int64_t>(0, s.query_offset + i0 - s.window + 1) : 0;
  return {i0, i1 - i0, lo, hi - lo};
}

// A block's products by chunks of up to kChunk rows: chunk rows [r0, r0 + rows) and the keys
// [lo, lo + keys) they see, up to the chunk's last row's position. The keys past it are hidden
// from every row of the chunk: they are neither multiplied nor read (the entries there are 0),
// which at a block of 64 rows and 64 keys leaves 3/4 of the square's multiply-adds. A block of
// more than kChunkedKeys keys stays whole: two products of half the rows cost more there than the
// corner they skip. (Float, one thread, the Zen 4, forward + backward of causal_attention_qkv,
// whole blocks against chunks: a GPT step's 12 x 4 heads of 64 x 32, 993 -> 832 us; 4 x 4 heads
// of 128 x 32, 920 -> 821 us; of 256 x 32, 2.93 -> 2.74 ms; 8 heads of 1024 x 64, 39.6 -> 39.3 ms,
// and 40.6 ms with every block chunked.)
constexpr int64_t kChunk = 32;
constexpr int64_t kChunkedKeys = 256;
struct Chunk {
  int64_t r0, rows, keys;
};

template <class F>
void for_chunks(const AttentionDims& s, const Block& b, F&& f) {
  if (b.keys > kChunkedKeys) {
    f(Chunk{0, b.rows, b.keys});
    return;
  }
  for (int64_t r0 = 0; r0 < b.rows; r0 += kChunk) {
    const int64_t rows = std::min(kChunk, b.rows - r0);
    f(Chunk{r0, rows, s.query_offset + b.i0 + r0 + rows - b.lo});
  }
}

// The keys query i sees, as columns [c0, c1) of a block whose first key is lo.
void visible(const AttentionDims& s, int64_t i, int64_t lo, int64_t& c0, int64_t& c1) {
  const int64_t pos = s.query_offset + i;
  c0 = (s.window > 0 ? std::max<int64_t>(lo, pos - s.window + 1) : lo) - lo;
  c1 = pos + 1 - lo;
}

// The most keys a block sees, for its scratch: (rows, keys) <= (min(64, T), T_k).
int64_t block_cap(const AttentionDims& s) { return std::min(kBlock, s.T) * s.T_k; }

// The row stride of the transposed keys and values, K^T (d, T_k) and V^T (d_v, T_k): T_k, or a
// cache line more where T_k entries are a multiple of 4 KiB (T_k 1024, 2048, ... in float). Rows
// that far apart share the L1 cache's sets, and a product reading a block's columns down them
// evicts its own rows: 64 x 256 x 32 ran at 46 GFLOP/s through BLIS's small-matrix kernels from
// rows 4 KiB apart against 90 from rows 1 KiB apart (the Zen 4, one thread).
template <class T>
int64_t key_stride(const AttentionDims& s) {
  return s.T_k * int64_t(sizeof(T)) % 4096 == 0 ? s.T_k + 64 / int64_t(sizeof(T)) : s.T_k;
}

// Per-thread scratch that keeps its buffer: no allocation (and no fresh pages) in a steady loop.
// Aligned like Eigen's own buffers: a vectorised row sum then splits a row the same way on every
// thread, which keeps the results identical for any thread count.
template <class T>
using Scratch = std::vector<T, Eigen::aligned_allocator<T>>;

template <class T>
T* scratch(Scratch<T>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(n);
  return buf.data();
}

// dst (cols, rows; row stride ldd) = src^T, src being (rows, cols) with row stride ld, on this
// thread: the panel product's transpose (panel_kernel.h), by the packets' in-register transpose.
// (On the Zen 4 it runs about as fast as the loop it replaced, one entry at a time by tiles of 16
// rows, at a GPT step's heads; 1% faster at (1, 256, 256, 4).)
template <class T>
void transpose_rows(const T* src, int64_t rows, int64_t cols, int64_t ld, T* dst, int64_t ldd) {
  transpose_into(src, ld, rows, cols, dst, ldd, 1);
}

// dst[0, n) = src[0, n), inline: a call to memmove for each short row costs more than the copy.
template <class T>
void copy_row(const T* src, int64_t n, T* dst) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(dst, n) =
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(src, n);
}

// S (rows, keys) = Q_i K^T scale for block b, K^T being kt (d, T_k; row stride key_stride); hidden
// entries are set to exactly 0 and `visible_part(r, row, len)` runs on each row's visible run.
template <class T, class F>
void score_block(const T* q, const T* kt, const AttentionDims& s, const Block& b, T sc, T* S,
                 F&& visible_part) {
  const int64_t ks = key_stride<T>(s);
  for_chunks(s, b, [&](const Chunk& c) {
    gemm<T>(view(q + (b.i0 + c.r0) * s.ldq, c.rows, s.d, s.ldq), view(kt + b.lo, s.d, c.keys, ks),
            view(S + c.r0 * b.keys, c.rows, c.keys, b.keys), sc);
  });
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t c0, c1;
    visible(s, b.i0 + r, b.lo, c0, c1);
    T* row = S + r * b.keys;
    std::fill(row, row + c0, T(0));
    std::fill(row + c1, row + b.keys, T(0));
    visible_part(r, row + c0, c1 - c0);
  }
}

// p = exp(p - shift) by Eigen's vectorised exp, 16 entries at a time wherever the row starts
// (fixed-size blocks: a dynamic map would take the entries before its first aligned one through
// libm), and the last len % 16 through a row of 16 (one by one they went through libm: a causal
// row's tail is a fifth of its entries at 64 keys).
template <class T>
void exp_shifted(T* p, int64_t len, T shift) {
  constexpr int64_t kLanes = 16;
  using Lanes = Eigen::Array<T, kLanes, 1>;
  const int64_t full = len - len % kLanes, tail = len - full;
  for (int64_t i = 0; i < full; i += kLanes)
    Eigen::Map<Lanes>(p + i) = (Eigen::Map<const Lanes>(p + i) - shift).exp();
  if (tail == 0) return;
  Lanes rest = Lanes::Zero();
  rest.head(tail) = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(p + full, tail);
  rest = (rest - shift).exp();
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(p + full, tail) = rest.head(tail);
}

// p = exp(p - m) / l with m = max p and l = sum exp(p - m); returns m + log l.
template <class T>
T softmax_row(T* p, int64_t len) {
  Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> a(p, len);
  const T m = a.maxCoeff();
  exp_shifted(p, len, m);
  const T l = a.sum();
  a /= l;
  return m + std::log(l);
}

// p = exp(p - lse): the weights again, from the forward's log-sum-exp.
template <class T>
void exp_row(T* p, int64_t len, T lse) {
  exp_shifted(p, len, lse);
}

// Block b's weights P: the next of the forward's kept blocks (`kept` moves past it), or, when
// `kept` is null, recomputed into `recomputed` as exp(S - lse), 0 where hidden (kt: K^T).
template <class T>
const T* block_weights(const AttentionDims& s, const Block& b, T sc, const T* q, const T* kt,
                       const T* lse, const T*& kept, T* recomputed) {
  if (kept) {
    const T* P = kept;
    kept += b.rows * b.keys;
    return P;
  }
  score_block(q, kt, s, b, sc, recomputed,
              [&](int64_t r, T* p, int64_t len) { exp_row(p, len, lse[b.i0 + r]); });
  return recomputed;
}

// Entries of the per-block weights of one (batch, head) entry: sum over blocks of rows x keys.
int64_t weights_per_entry(const AttentionDims& s) {
  int64_t total = 0;
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const Block b = block_at(s, i0);
    total += b.rows * b.keys;
  }
  return total;
}

std::atomic<std::size_t> weights_limit{std::size_t{32} << 20};

// O = softmax(S) V for one entry. With `keep`, the weights stay there, block after block (the
// layout weights_per_entry counts), for the backward; else they live in per-thread scratch.
template <class T>
void forward_entry(const AttentionDims& s, T sc, AttentionInputs<T> in, T* o, T* lse, T* keep) {
  thread_local Scratch<T> buf, kt_buf;
  T* const block_buf = keep ? nullptr : scratch(buf, block_cap(s));
  // K^T (d, T_k), so that every score block is a product of untransposed operands (the faster
  // kind in BLIS: 73 against 46 GFLOP/s at 64x256x64 in float).
  const int64_t ks = key_stride<T>(s);
  T* kt = scratch(kt_buf, s.d * ks);
  transpose_rows(in.k, s.T_k, s.d, s.ldq, kt, ks);
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const Block b = block_at(s, i0);
    T* P = keep ? keep : block_buf;
    // S, turned into P = softmax(S) over the visible keys row by row, 0 elsewhere
    score_block(in.q, kt, s, b, sc, P,
                [&](int64_t r, T* p, int64_t len) { lse[i0 + r] = softmax_row(p, len); });
    for_chunks(s, b, [&](const Chunk& c) {  // O_i = P V
      gemm<T>(view(P + c.r0 * b.keys, c.rows, c.keys, b.keys),
              view(in.v + b.lo * s.ldv, c.keys, s.dv, s.ldv),
              view(o + (i0 + c.r0) * s.ldo, c.rows, s.dv, s.ldo));
    });
    if (keep) keep += b.rows * b.keys;
  }
}

// dQ, dK, dV of one entry; `kept` holds the forward's weights, or is null to recompute them.
template <class T>
void backward_entry(const AttentionDims& s, T sc, AttentionInputs<T> in, const T* dout,
                    const T* lse, const T* kept, AttentionGrads<T> g) {
  using SMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  SMap(g.dk, s.T_k, s.d, Eigen::OuterStride<>(s.ldq)).setZero();
  SMap(g.dv, s.T_k, s.dv, Eigen::OuterStride<>(s.ldv)).setZero();
  thread_local Scratch<T> buf, t_buf;
  const int64_t cap = block_cap(s);
  T* const scores_grad = scratch(buf, 2 * cap);  // a block's dP, then its dS (made in place)
  T* const P_recomputed = scores_grad + cap;
  // V^T (d_v, T_k), and K^T (d, T_k) when the weights are recomputed: untransposed products.
  const int64_t ks = key_stride<T>(s);
  T* vt = scratch(t_buf, (s.dv + (kept ? 0 : s.d)) * ks);
  T* kt = vt + s.dv * ks;
  transpose_rows(in.v, s.T_k, s.dv, s.ldv, vt, ks);
  if (!kept) transpose_rows(in.k, s.T_k, s.d, s.ldq, kt, ks);
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const Block b = block_at(s, i0);
    const int64_t n = b.keys;
    const T* P = block_weights(s, b, sc, in.q, kt, lse, kept, P_recomputed);
    for_chunks(s, b, [&](const Chunk& c) {
      const T* const P_c = P + c.r0 * n;
      T* const grad_c = scores_grad + c.r0 * n;  // the chunk's dP, made its dS row by row
      const auto dO_c = view(dout + (i0 + c.r0) * s.ldo, c.rows, s.dv, s.ldo);
      gemm<T>(view(P_c, c.rows, c.keys, n).t(), dO_c,
              view(g.dv + b.lo * s.ldv, c.keys, s.dv, s.ldv), T(1), T(1));  // dV += P^T dO_i
      gemm<T>(dO_c, view(vt + b.lo, s.dv, c.keys, ks),
              view(grad_c, c.rows, c.keys, n));  // dP = dO_i V^T
      // dS = P * (dP - D_i) scale, with D_i = sum_j P_ij dP_ij (= dO_i . O_i, O_i being
      // sum_j P_ij V_j): the chunk holds every key its rows see, and a hidden P_ij is 0. A row
      // that sees one key (P_ii = 1) gets D_i = dP_ii and dS_ii = 0 exactly, whichever product
      // made dP.
      for (int64_t r = 0; r < c.rows; ++r) {
        T* row = grad_c + r * n;
        const T* p = P_c + r * n;
        const T Di = (CRow(p, c.keys) * CRow(row, c.keys)).sum();
        for (int64_t j = 0; j < c.keys; ++j) row[j] = p[j] * (row[j] - Di) * sc;
      }
      gemm<T>(view(grad_c, c.rows, c.keys, n), view(in.k + b.lo * s.ldq, c.keys, s.d, s.ldq),
              view(g.dq + (i0 + c.r0) * s.ldq, c.rows, s.d, s.ldq));  // dQ_i = dS K
      gemm<T>(view(grad_c, c.rows, c.keys, n).t(),
              view(in.q + (i0 + c.r0) * s.ldq, c.rows, s.d, s.ldq),
              view(g.dk + b.lo * s.ldq, c.keys, s.d, s.ldq), T(1), T(1));  // dK += dS^T Q_i
    });
  }
}

// tA = P * (tS - rowsum(tS * P)) for block b: tA (row stride lda) may be tS itself (stride n),
// written in place; with `copy_p`, P also goes to the right of each tA row ([tA | P]). A
// vectorised sum: a row with one visible key still gets exactly 0 (P = 1: tS - tS).
template <class T>
void tangent_weights(const AttentionDims& s, const Block& b, const T* P, const T* tS, T* tA,
                     int64_t lda, bool copy_p) {
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t n = b.keys;
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t c0, c1;
    visible(s, b.i0 + r, b.lo, c0, c1);
    const T* p = P + r * n;
    T* ta = tA + r * lda;
    const CRow p_run(p + c0, c1 - c0), ts_run(tS + r * n + c0, c1 - c0);
    const T dot = (p_run * ts_run).sum();
    std::fill(ta, ta + c0, T(0));
    Row(ta + c0, c1 - c0) = p_run * (ts_run - dot);
    std::fill(ta + c1, ta + n, T(0));
    if (copy_p) copy_row(p, n, ta + n);
  }
}

// A dual pass's per-thread scratch for one entry: a block's weights P and score tangents tS,
// [K^T; tK^T] (2d, T_k), and for paired products the rows [tQ_i | Q_i] (T, 2d), a block's
// [tA | P] (rows, 2 keys) and [V; tV] (2 keys, dv).
template <class T>
struct DualScratch {
  T *P, *tS, *kt, *tkt, *q_pair, *tA_P, *v_pair;
  DualScratch(const AttentionDims& s, bool pair_q, bool pair_v) {
    thread_local Scratch<T> buf, k_buf, pair_buf;
    const int64_t cap = block_cap(s);
    P = scratch(buf, 2 * cap);
    tS = P + cap;
    const int64_t ks = key_stride<T>(s);
    kt = scratch(k_buf, 2 * s.d * ks);
    tkt = kt + s.d * ks;  // so [K^T; tK^T] is one (2d, T_k) view from kt
    const int64_t q2 = pair_q ? 2 * s.d * s.T : 0;
    const int64_t ap = pair_v ? 2 * cap : 0, vv = pair_v ? 2 * s.T_k * s.dv : 0;
    q_pair = scratch(pair_buf, q2 + ap + vv);
    tA_P = q_pair + q2;
    v_pair = tA_P + ap;
  }
};

// O and tO of one entry in one pass (the math at the top of attention_kernels.h; t's pointers
// may be null): each block's weights are made once and used by both while in cache. Where both
// terms of a tangent product are there, they are one product over twice the inner size:
// tS = [tQ_i | Q_i] [K^T; tK^T] and tO_i = [tA | P] [V; tV] (a small product's fixed cost,
// BLIS's call and OpenMP region, is worth more than the copies). No log-sum-exps are kept: no
// backward follows a dual pass.
template <class T>
void dual_entry(const AttentionDims& s, T sc, AttentionInputs<T> in, AttentionInputs<T> t, T* o,
                T* tout) {
  const bool scores_move = t.q || t.k;
  const bool pair_q = t.q && t.k, pair_v = scores_move && t.v;
  const DualScratch<T> w(s, pair_q, pair_v);
  const int64_t ks = key_stride<T>(s);
  transpose_rows(in.k, s.T_k, s.d, s.ldq, w.kt, ks);
  if (t.k) transpose_rows(t.k, s.T_k, s.d, s.ldq, w.tkt, ks);
  if (pair_q)
    for (int64_t i = 0; i < s.T; ++i) {
      copy_row(t.q + i * s.ldq, s.d, w.q_pair + i * 2 * s.d);
      copy_row(in.q + i * s.ldq, s.d, w.q_pair + i * 2 * s.d + s.d);
    }
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const Block b = block_at(s, i0);
    const int64_t n = b.keys;
    // the forward's block: P = softmax(S), O_i = P V
    score_block(in.q, w.kt, s, b, sc, w.P, [](int64_t, T* p, int64_t len) { softmax_row(p, len); });
    const auto V_keys = view(in.v + b.lo * s.ldv, n, s.dv, s.ldv);
    gemm<T>(view(w.P, b.rows, n), V_keys, view(o + i0 * s.ldo, b.rows, s.dv, s.ldo));
    const auto tO_i = view(tout + i0 * s.ldo, b.rows, s.dv, s.ldo);
    if (!scores_move) {  // tO_i = P tV
      gemm<T>(view(w.P, b.rows, n), view(t.v + b.lo * s.ldv, n, s.dv, s.ldv), tO_i);
      continue;
    }
    const auto tS_i = view(w.tS, b.rows, n);
    if (pair_q)  // tS = [tQ_i | Q_i] [K^T; tK^T] scale
      gemm<T>(view(w.q_pair + i0 * 2 * s.d, b.rows, 2 * s.d),
              view(w.kt + b.lo, 2 * s.d, n, ks), tS_i, sc);
    else if (t.q)  // tS = tQ_i K^T scale
      gemm<T>(view(t.q + i0 * s.ldq, b.rows, s.d, s.ldq), view(w.kt + b.lo, s.d, n, ks), tS_i,
              sc);
    else  // tS = Q_i tK^T scale
      gemm<T>(view(in.q + i0 * s.ldq, b.rows, s.d, s.ldq), view(w.tkt + b.lo, s.d, n, ks), tS_i,
              sc);
    if (!pair_v) {  // tO_i = tA V, tA written over tS
      tangent_weights(s, b, w.P, w.tS, w.tS, n, false);
      gemm<T>(view(w.tS, b.rows, n), V_keys, tO_i);
      continue;
    }
    tangent_weights(s, b, w.P, w.tS, w.tA_P, 2 * n, true);  // tO_i = [tA | P] [V; tV]
    for (int64_t j = 0; j < n; ++j) {
      copy_row(in.v + (b.lo + j) * s.ldv, s.dv, w.v_pair + j * s.dv);
      copy_row(t.v + (b.lo + j) * s.ldv, s.dv, w.v_pair + (n + j) * s.dv);
    }
    gemm<T>(view(w.tA_P, b.rows, 2 * n), view(w.v_pair, 2 * n, s.dv), tO_i);
  }
}

// Entry n's inputs and gradients, at their offsets (a null pointer stays null).
template <class T>
AttentionInputs<T> entry(const AttentionDims& s, AttentionInputs<T> in, int64_t n) {
  auto at = [](const T* p, int64_t off) { return p ? p + off : nullptr; };
  return {at(in.q, s.q_off(n)), at(in.k, s.k_off(n)), at(in.v, s.v_off(n))};
}
template <class T>
AttentionGrads<T> entry(const AttentionDims& s, AttentionGrads<T> g, int64_t n) {
  return {g.dq + s.q_off(n), g.dk + s.k_off(n), g.dv + s.v_off(n)};
}

}  // namespace

KeptLayout kept_layout(const AttentionDims& s, std::size_t elem_size, bool backward_coming) {
  KeptLayout k;
  k.per_entry = weights_per_entry(s);
  const int64_t per_line = 64 / static_cast<int64_t>(elem_size);
  k.lse_n = (s.N * s.T + per_line - 1) / per_line * per_line;
  k.weights = backward_coming && static_cast<double>(s.N) * k.per_entry * elem_size <=
                                     static_cast<double>(weights_limit.load());
  return k;
}

template <class T>
void attention_forward(const AttentionDims& s, T scale, AttentionInputs<T> in, T* o, T* kept,
                       const KeptLayout& layout) {
  T* w = layout.weights ? kept + layout.lse_n : nullptr;
  for_each_entry(s.N, work_of(s), [&](int64_t n) {
    forward_entry<T>(s, scale, entry(s, in, n), o + s.o_off(n), kept + n * s.T,
                     w ? w + n * layout.per_entry : nullptr);
  });
}

template <class T>
void attention_backward(const AttentionDims& s, T scale, AttentionInputs<T> in, const T* dout,
                        const T* kept, const KeptLayout& layout, AttentionGrads<T> grads) {
  const T* w = layout.weights ? kept + layout.lse_n : nullptr;
  for_each_entry(s.N, work_of(s), [&](int64_t n) {
    backward_entry<T>(s, scale, entry(s, in, n), dout + s.o_off(n), kept + n * s.T,
                      w ? w + n * layout.per_entry : nullptr, entry(s, grads, n));
  });
}

template <class T>
void attention_forward_tangent(const AttentionDims& s, T scale, AttentionInputs<T> in,
                               AttentionInputs<T> tangents, T* o, T* tout) {
  for_each_entry(s.N, 2 * work_of(s), [&](int64_t n) {
    dual_entry<T>(s, scale, entry(s, in, n), entry(s, tangents, n), o + s.o_off(n),
                  tout + s.o_off(n));
  });
}

template void attention_forward<float>(const AttentionDims&, float, AttentionInputs<float>,
                                       float*, float*, const KeptLayout&);
template void attention_forward<double>(const AttentionDims&, double, AttentionInputs<double>,
                                        double*, double*, const KeptLayout&);
template void attention_backward<float>(const AttentionDims&, float, AttentionInputs<float>,
                                        const float*, const float*, const KeptLayout&,
                                        AttentionGrads<float>);
template void attention_backward<double>(const AttentionDims&, double, AttentionInputs<double>,
                                         const double*, const double*, const KeptLayout&,
                                         AttentionGrads<double>);

template void attention_forward_tangent<float>(const AttentionDims&, float,
                                               AttentionInputs<float>, AttentionInputs<float>,
                                               float*, float*);
template void attention_forward_tangent<double>(const AttentionDims&, double,
                                                AttentionInputs<double>, AttentionInputs<double>,
                                                double*, double*);

void set_attention_weights_limit(std::size_t bytes) { weights_limit.store(bytes); }
std::size_t attention_weights_limit() { return weights_limit.load(); }

}  // namespace tg::detail
