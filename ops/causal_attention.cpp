// causal_attention, fused: the (T, T) weights are never formed. Per block of query rows i (64
// at a time) and the keys they see, [lo, hi):
//   forward:  S = Q_i K_lo:hi^T scale + M;  m = rowmax S;  l = rowsum exp(S - m)
//             P = exp(S - m) / l;  O_i = P V_lo:hi;  lse_i = m + log l
//             (saved: lse, and the blocks of P while they fit in weights_limit)
//   backward, with D_i = rowsum(dO_i * O_i) and P kept or recomputed as exp(S - lse_i):
//             dV_lo:hi += P^T dO_i;  dP = dO_i V_lo:hi^T;  dS = P * (dP - D_i) scale
//             dQ_i = dS K_lo:hi;  dK_lo:hi += dS^T Q_i
// A row block's scores take (64, T) scratch per thread, so memory stays O(T d) per head, and
// every product is one GEMM over all the keys the block sees (masked blocks are skipped whole;
// only the diagonal block computes entries it then zeroes). Row i always sees itself, so l > 0
// and lse is finite. The formula (what create_graph records) recomputes the weights with ops.
// The same kernels serve three layouts (Dims): separate (..., T, d) operands, heads packed along
// the last axis (causal_attention_heads), and Q, K, V side by side in one (..., T, 3C)
// projection (causal_attention_qkv), whose backward writes dQ, dK, dV into one gradient.

#include "ops/causal_attention.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "ops/add_mask.h"
#include "ops/gemm.h"
#include "ops/matmul.h"
#include "ops/mul.h"
#include "ops/narrow.h"
#include "ops/op_util.h"
#include "ops/permute.h"
#include "ops/reshape.h"
#include "ops/scale.h"
#include "ops/softmax.h"
#include "ops/sub.h"
#include "ops/sum.h"
#include "ops/threads.h"

namespace tg {

namespace {

constexpr int64_t kBlock = 64;

// Runs body(n) for n in [0, N): in parallel over OpenMP threads when the work (about
// N T^2 d multiply-adds) pays for starting a thread team, directly otherwise. Each entry is
// computed the same way either way, so results do not depend on the thread count.
template <class F>
void for_each_entry(int64_t N, int64_t work, F&& body) {
  if (N == 1 || work < (int64_t{1} << 18)) {
    for (int64_t n = 0; n < N; ++n) body(n);
    return;
  }
  const int team = detail::team_size();
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
  for (int64_t n = 0; n < N; ++n) body(n);
}

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

// N entries (batch x heads) of T rows; Q, K rows hold d values and V, O rows d_v, with row
// strides ldq (Q, K), ldv (V) and ldo (O): d, d_v and d_v for (..., T, d) operands; H d, H d_v
// and H d_v when H heads are packed along the last axis; 3 H d, 3 H d and H d when Q, K and V
// are read from one (..., T, 3 H d) projection, K starting at column k_col = H d and V at
// v_col = 2 H d. Entry n = b H + h starts at row b T, column h d (plus k_col, v_col). The
// gradients dQ, dK, dV share their inputs' layout, dO the output's.
struct Dims {
  int64_t N, T, d, dv, H = 1, ldq = 0, ldv = 0, ldo = 0, k_col = 0, v_col = 0;
  int64_t q_off(int64_t n) const { return (n / H) * T * ldq + (n % H) * d; }
  int64_t k_off(int64_t n) const { return q_off(n) + k_col; }
  int64_t v_off(int64_t n) const { return (n / H) * T * ldv + (n % H) * dv + v_col; }
  int64_t o_off(int64_t n) const { return (n / H) * T * ldo + (n % H) * dv; }
};

// Visible key range [lo, hi) of query rows [i0, i1): causal, and the window's left edge.
inline void key_range(int64_t i0, int64_t i1, int64_t window, int64_t& lo, int64_t& hi) {
  hi = i1;
  lo = window > 0 ? std::max<int64_t>(0, i0 - window + 1) : 0;
}

// The keys query i sees, as columns [c0, c1) of a block whose first key is lo.
inline void visible(int64_t i, int64_t lo, int64_t window, int64_t& c0, int64_t& c1) {
  c0 = (window > 0 ? std::max<int64_t>(lo, i - window + 1) : lo) - lo;
  c1 = i + 1 - lo;
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

// dst (cols, rows) = src^T, src being (rows, cols) with row stride ld; 16 source rows at a time,
// so that both sides move through memory in runs rather than one element per cache line.
template <class T>
void transpose_rows(const T* src, int64_t rows, int64_t cols, int64_t ld, T* dst) {
  constexpr int64_t kTile = 16;
  for (int64_t j0 = 0; j0 < rows; j0 += kTile) {
    const int64_t j1 = std::min(rows, j0 + kTile);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t j = j0; j < j1; ++j) dst[c * rows + j] = src[j * ld + c];
  }
}

// S = Q_i K^T scale for query rows [i0, i0 + br) against keys [lo, lo + n), K^T being kt (d, T);
// hidden entries are set to exactly 0 and `visible_part(r, row, len)` runs on each row's
// visible run.
template <class T, class F>
void score_block(const T* q, const T* kt, const Dims& s, int64_t i0, int64_t br, int64_t lo,
                 int64_t n, T sc, int64_t window, T* S, F&& visible_part) {
  detail::gemm<T>(q + i0 * s.ldq, br, s.d, s.ldq, false, kt + lo, s.d, n, s.T, false, S, n, sc);
  for (int64_t r = 0; r < br; ++r) {
    int64_t c0, c1;
    visible(i0 + r, lo, window, c0, c1);
    T* row = S + r * n;
    std::fill(row, row + c0, T(0));
    std::fill(row + c1, row + n, T(0));
    visible_part(r, row + c0, c1 - c0);
  }
}

// p = exp(p - m) / l with m = max p and l = sum exp(p - m) (Eigen's vectorised exp); returns
// m + log l.
template <class T>
T softmax_row(T* p, int64_t len) {
  Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> a(p, len);
  const T m = a.maxCoeff();
  a = (a - m).exp();
  const T l = a.sum();
  a /= l;
  return m + std::log(l);
}

// p = exp(p - lse): the weights again, from the forward's log-sum-exp.
template <class T>
void exp_row(T* p, int64_t len, T lse) {
  Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> a(p, len);
  a = (a - lse).exp();
}

// Entries of the per-block weights of one (batch, head) entry: sum over row blocks of br x n.
int64_t weights_per_entry(int64_t T, int64_t window) {
  int64_t total = 0;
  for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
    const int64_t i1 = std::min(T, i0 + kBlock);
    int64_t lo, hi;
    key_range(i0, i1, window, lo, hi);
    total += (i1 - i0) * (hi - lo);
  }
  return total;
}

std::atomic<std::size_t> weights_limit{std::size_t{32} << 20};

// O = softmax(S) V for one entry. With `keep`, the weights stay there, block after block (the
// layout weights_per_entry counts), for the backward; else they live in per-thread scratch.
template <class T>
void forward_one(const T* q, const T* k, const T* v, T* o, T* lse, T* keep, const Dims& s, T sc,
                 int64_t window) {
  thread_local Scratch<T> buf, kt_buf;
  T* S = keep ? keep : scratch(buf, std::min(kBlock, s.T) * s.T);
  // K^T (d, T), so that every score block is a product of untransposed operands (the faster
  // kind in BLIS: 73 against 46 GFLOP/s at 64x256x64 in float).
  T* kt = scratch(kt_buf, s.d * s.T);
  transpose_rows(k, s.T, s.d, s.ldq, kt);
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const int64_t i1 = std::min(s.T, i0 + kBlock), br = i1 - i0;
    int64_t lo, hi;
    key_range(i0, i1, window, lo, hi);
    const int64_t n = hi - lo;
    // P = softmax(S) over the visible keys, 0 elsewhere
    score_block(q, kt, s, i0, br, lo, n, sc, window, S,
                [&](int64_t r, T* p, int64_t len) { lse[i0 + r] = softmax_row(p, len); });
    detail::gemm<T>(S, br, n, n, false, v + lo * s.ldv, n, s.dv, s.ldv, false, o + i0 * s.ldo,
                    s.ldo);  // O_i = P V
    if (keep) S += br * n;
  }
}

// dQ, dK, dV of one entry; `kept` holds the forward's weights, or is null to recompute them.
template <class T>
void backward_one(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* kept,
                  const T* dout, T* dq, T* dk, T* dv, const Dims& s, T sc, int64_t window) {
  using SMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;
  SMap(dk, s.T, s.d, Eigen::OuterStride<>(s.ldq)).setZero();
  SMap(dv, s.T, s.dv, Eigen::OuterStride<>(s.ldv)).setZero();
  // D_i = sum_c dO_ic O_ic, summed in the order (and with the multiply-adds) of the small
  // products, so that a row with one visible key (P = 1, O_i = V_i) gets dP_ii - D_i = 0 exactly.
  thread_local Vec<T> D;
  D.resize(s.T);
  for (int64_t i = 0; i < s.T; ++i) {
    const T* a = dout + i * s.ldo;
    const T* b = o + i * s.ldo;
    T sum = T(0);
    for (int64_t c = 0; c < s.dv; ++c) sum = detail::madd(a[c], b[c], sum);
    D(i) = sum;
  }
  thread_local Scratch<T> buf, t_buf;
  const int64_t cap = std::min(kBlock, s.T) * s.T;
  T* dP = scratch(buf, 2 * cap);
  T* recomputed = dP + cap;
  // V^T (d_v, T), and K^T (d, T) when the weights are recomputed: untransposed products.
  T* vt = scratch(t_buf, (s.dv + (kept ? 0 : s.d)) * s.T);
  T* kt = vt + s.dv * s.T;
  transpose_rows(v, s.T, s.dv, s.ldv, vt);
  if (!kept) transpose_rows(k, s.T, s.d, s.ldq, kt);
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const int64_t i1 = std::min(s.T, i0 + kBlock), br = i1 - i0;
    int64_t lo, hi;
    key_range(i0, i1, window, lo, hi);
    const int64_t n = hi - lo;
    const T* P = kept;
    if (kept) {
      kept += br * n;
    } else {
      // P = exp(S - lse), 0 where hidden
      score_block(q, kt, s, i0, br, lo, n, sc, window, recomputed,
                  [&](int64_t r, T* p, int64_t len) { exp_row(p, len, lse[i0 + r]); });
      P = recomputed;
    }
    detail::gemm<T>(P, br, n, n, true, dout + i0 * s.ldo, br, s.dv, s.ldo, false,
                    dv + lo * s.ldv, s.ldv, T(1), T(1));  // dV += P^T dO_i
    detail::gemm<T>(dout + i0 * s.ldo, br, s.dv, s.ldo, false, vt + lo, s.dv, n, s.T, false, dP,
                    n);  // dP = dO_i V^T
    for (int64_t r = 0; r < br; ++r) {  // dS = P * (dP - D_i) scale
      T* ds = dP + r * n;
      const T* p = P + r * n;
      const T Di = D(i0 + r);
      for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - Di) * sc;
    }
    detail::gemm<T>(dP, br, n, n, false, k + lo * s.ldq, n, s.d, s.ldq, false, dq + i0 * s.ldq,
                    s.ldq);  // dQ_i = dS K
    detail::gemm<T>(dP, br, n, n, true, q + i0 * s.ldq, br, s.d, s.ldq, false, dk + lo * s.ldq,
                    s.ldq, T(1), T(1));  // dK += dS^T Q_i
  }
}

void check_inputs(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t window, Dims& s) {
  detail::check_same_dtype("causal_attention", Q, K);
  detail::check_same_dtype("causal_attention", Q, V);
  auto shapes = [&] { return Q.shape().str() + ", " + K.shape().str() + ", " + V.shape().str(); };
  if (Q.rank() < 2 || Q.shape() != K.shape() || V.rank() != Q.rank())
    throw ShapeError("causal_attention: Q and K must be (..., T, d) and V (..., T, d_v) of the "
                     "same rank >= 2, got " + shapes());
  for (int a = 0; a < Q.rank() - 1; ++a)
    if (Q.shape()[a] != V.shape()[a])
      throw ShapeError("causal_attention: Q, K and V must share their leading axes and T, got " +
                       shapes());
  if (window < 0)
    throw ValueError("causal_attention: window must be at least 1 (0 for none), got " +
                     std::to_string(window));
  s.T = Q.size(-2);
  s.d = Q.size(-1);
  s.dv = V.size(-1);
  s.ldq = s.d;
  s.ldv = s.ldo = s.dv;
  s.N = 1;
  for (int a = 0; a < Q.rank() - 2; ++a) s.N *= Q.shape()[a];
}

// The packed layout: Q, K (..., T, H d) and V (..., T, H d_v).
void check_packed(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t heads,
                  int64_t window, Dims& s) {
  detail::check_same_dtype("causal_attention_heads", Q, K);
  detail::check_same_dtype("causal_attention_heads", Q, V);
  auto shapes = [&] {
    return Q.shape().str() + ", " + K.shape().str() + ", " + V.shape().str() + " with " +
           std::to_string(heads) + " heads";
  };
  if (heads < 1)
    throw ValueError("causal_attention_heads: heads must be at least 1, got " +
                     std::to_string(heads));
  if (Q.rank() < 2 || Q.rank() > 3 || Q.shape() != K.shape() || V.rank() != Q.rank())
    throw ShapeError("causal_attention_heads: Q and K must be (T, H d) or (B, T, H d) and V "
                     "(T, H d_v) or (B, T, H d_v), got " + shapes());
  for (int a = 0; a < Q.rank() - 1; ++a)
    if (Q.shape()[a] != V.shape()[a])
      throw ShapeError("causal_attention_heads: Q, K and V must share B and T, got " + shapes());
  if (Q.size(-1) % heads != 0 || V.size(-1) % heads != 0)
    throw ShapeError("causal_attention_heads: the heads must divide the last axes, got " +
                     shapes());
  if (window < 0)
    throw ValueError("causal_attention_heads: window must be at least 1 (0 for none), got " +
                     std::to_string(window));
  s.T = Q.size(-2);
  s.H = heads;
  s.ldq = Q.size(-1);
  s.ldv = s.ldo = V.size(-1);
  s.d = s.ldq / heads;
  s.dv = s.ldv / heads;
  s.N = (Q.rank() == 3 ? Q.size(0) : 1) * heads;
}

// One packed projection (..., T, 3 H d): Q, K and V side by side, each with H heads.
void check_qkv(const Tensor& QKV, int64_t heads, int64_t window, Dims& s) {
  detail::check_floating("causal_attention_qkv", QKV);
  auto shape = [&] { return QKV.shape().str() + " with " + std::to_string(heads) + " heads"; };
  if (heads < 1)
    throw ValueError("causal_attention_qkv: heads must be at least 1, got " +
                     std::to_string(heads));
  if (QKV.rank() < 2 || QKV.rank() > 3)
    throw ShapeError("causal_attention_qkv: QKV must be (T, 3 H d) or (B, T, 3 H d), got " +
                     shape());
  if (QKV.size(-1) % (3 * heads) != 0)
    throw ShapeError("causal_attention_qkv: 3 x heads must divide the last axis, got " + shape());
  if (window < 0)
    throw ValueError("causal_attention_qkv: window must be at least 1 (0 for none), got " +
                     std::to_string(window));
  const int64_t C = QKV.size(-1) / 3;
  s.T = QKV.size(-2);
  s.H = heads;
  s.ldq = s.ldv = 3 * C;
  s.ldo = C;
  s.k_col = C;
  s.v_col = 2 * C;
  s.d = s.dv = C / heads;
  s.N = (QKV.rank() == 3 ? QKV.size(0) : 1) * heads;
}

}  // namespace

Tensor causal_attention_composed(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                                 int64_t window) {
  Dims s{};
  check_inputs(Q, K, V, window, s);
  const Tensor S = scale(matmul(Q, K, false, true), sc);                         // (.., T, T)
  return matmul(softmax(add_mask(S, causal_mask(s.T, Q.dtype(), window))), V);  // (.., T, d_v)
}

namespace {

// (B, T, H d) -> (B, H, T, d): head h's columns as an entry of its own (a copy).
Tensor split_heads(const Tensor& P, int64_t heads) {
  const bool batched = P.rank() == 3;
  const int64_t B = batched ? P.size(0) : 1, T = P.size(-2), d = P.size(-1) / heads;
  return permute(reshape(P, {B, T, heads, d}), {0, 2, 1, 3});
}

// (B, H, T, d) -> (B, T, H d), or (H, T, d) -> (T, H d) when `like` is 2-D: split_heads undone.
Tensor merge_heads(const Tensor& P, const Tensor& like) {
  std::vector<int64_t> shape = like.shape().vec();
  shape.back() = P.size(1) * P.size(-1);
  return reshape(permute(P, {0, 2, 1, 3}), shape);
}

// The packed op from the composed ones: split the heads, attend, merge them back.
Tensor packed_composed(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t heads,
                       double sc, int64_t window) {
  const Tensor O = causal_attention_composed(split_heads(Q, heads), split_heads(K, heads),
                                             split_heads(V, heads), sc, window);  // (B, H, T, dv)
  return merge_heads(O, V);
}

// The derivative formula, in ops: the weights recomputed with softmax, then
//   dV = A^T dO;  dA = dO V^T;  dS = A * (dA - rowsum(dA * A));  dQ = dS K sc;  dK = dS^T Q sc
Grads attention_formula(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO,
                        double sc, int64_t window) {
  const Tensor S = scale(matmul(Q, K, false, true), sc);                         // (.., T, T)
  const Tensor A = softmax(add_mask(S, causal_mask(Q.size(-2), Q.dtype(), window)));
  const Tensor dA = matmul(dO, V, false, true);                                  // (.., T, T)
  const Tensor dS = mul(A, sub(dA, sum(mul(dA, A), -1, true)));                  // (.., T, T)
  return {scale(matmul(dS, K), sc), scale(matmul(dS, Q, true, false), sc),      // dQ, dK
          matmul(A, dO, true, false)};                                           // dV
}

// The same for heads packed along the last axis: split, differentiate per head, merge.
Grads packed_formula(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO,
                     int64_t heads, double sc, int64_t window) {
  const Grads g = attention_formula(split_heads(Q, heads), split_heads(K, heads),
                                    split_heads(V, heads), split_heads(dO, heads), sc, window);
  return {merge_heads(g[0], Q), merge_heads(g[1], K), merge_heads(g[2], V)};
}

// What the fused forward keeps for the fused backward, in one buffer: the row log-sum-exps,
// then (from a 64-byte boundary) the weights when a backward is coming and they fit in the
// limit; otherwise the backward recomputes them from Q, K and lse.
struct Kept {
  Tensor buf;
  bool weights = false;
  int64_t lse_n = 0, per_entry = 0;
};

// O = the attention of every entry, Q, K and V read at the offsets and strides of `s` (they
// may be one tensor: the packed projection). The fused forward kernel.
Kept forward_all(const Tensor& Q, const Tensor& K, const Tensor& V, Tensor& O, const Dims& s,
                 double sc, int64_t window, bool backward_coming) {
  Kept kept;
  kept.per_entry = weights_per_entry(s.T, window);
  const int64_t per_line = 64 / static_cast<int64_t>(dtype_size(Q.dtype()));
  kept.lse_n = (s.N * s.T + per_line - 1) / per_line * per_line;
  kept.weights = backward_coming && static_cast<double>(s.N) * kept.per_entry *
                                            dtype_size(Q.dtype()) <=
                                        static_cast<double>(weights_limit.load());
  kept.buf = Tensor(Shape{kept.lse_n + (kept.weights ? s.N * kept.per_entry : 0)}, Q.dtype());
  dispatch(Q.dtype(), [&]<class T>() {
    const T* q = Q.data<T>();
    const T* k = K.data<T>();
    const T* v = V.data<T>();
    T* o = O.data<T>();
    T* l = kept.buf.data<T>();
    T* w = kept.weights ? l + kept.lse_n : nullptr;
    for_each_entry(s.N, s.N * s.T * s.T * (s.d + s.dv), [&](int64_t n) {
      forward_one<T>(q + s.q_off(n), k + s.k_off(n), v + s.v_off(n), o + s.o_off(n),
                     l + n * s.T, w ? w + n * kept.per_entry : nullptr, s, static_cast<T>(sc),
                     window);
    });
  });
  return kept;
}

// dQ, dK, dV of every entry from dO (laid out like O), written at the offsets and strides of
// `s` (they may be one tensor: every element of the packed gradient is written, none added).
// The fused backward kernel, reusing the forward's log-sum-exps (and weights, when kept).
void backward_all(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& O,
                  const Tensor& dO, const Kept& kept, Tensor& dQ, Tensor& dK, Tensor& dV,
                  const Dims& s, double sc, int64_t window) {
  dispatch(Q.dtype(), [&]<class T>() {
    const T* q = Q.data<T>();
    const T* k = K.data<T>();
    const T* v = V.data<T>();
    const T* o = O.data<T>();
    const T* l = kept.buf.data<T>();
    const T* w = kept.weights ? l + kept.lse_n : nullptr;
    const T* d = dO.data<T>();
    T* dq = dQ.data<T>();
    T* dk = dK.data<T>();
    T* dv = dV.data<T>();
    for_each_entry(s.N, s.N * s.T * s.T * (s.d + s.dv), [&](int64_t n) {
      backward_one<T>(q + s.q_off(n), k + s.k_off(n), v + s.v_off(n), o + s.o_off(n),
                      l + n * s.T, w ? w + n * kept.per_entry : nullptr, d + s.o_off(n),
                      dq + s.q_off(n), dk + s.k_off(n), dv + s.v_off(n), s, static_cast<T>(sc),
                      window);
    });
  });
}

// Runs the fused kernels on separate Q, K, V and records the derivative: `formula` in ops, and
// the fused backward kernel.
template <class Formula>
Tensor fused(const char* op, const Tensor& Q, const Tensor& K, const Tensor& V, const Dims& s,
             double sc, int64_t window, Formula formula, const std::source_location& where) {
  Tensor O(V.shape(), Q.dtype());
  const Kept kept = forward_all(Q, K, V, O, s, sc, window,
                                is_grad_enabled() && detail::any_requires_grad({Q, K, V}));
  return record(op, O, {Q, K, V}, where)
      .saves(Q, K, V)
      .formula([Q, K, V, formula](const Tensor& dO) { return formula(Q, K, V, dO); })
      .kernel([Q, K, V, kept, sc, window, s](const Tensor& dO, const Tensor& O) -> Grads {
        Tensor dQ(Q.shape(), Q.dtype()), dK(K.shape(), K.dtype()), dV(V.shape(), V.dtype());
        backward_all(Q, K, V, O, dO, kept, dQ, dK, dV, s, sc, window);
        return {dQ, dK, dV};
      });
}

}  // namespace

Tensor causal_attention(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                        int64_t window, const std::source_location& where) {
  Dims s{};
  check_inputs(Q, K, V, window, s);
  return fused("causal_attention", Q, K, V, s, sc, window,
               [sc, window](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dO) {
                 return attention_formula(q, k, v, dO, sc, window);
               }, where);
}

Tensor causal_attention_heads(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t heads,
                              double sc, int64_t window, const std::source_location& where) {
  Dims s{};
  check_packed(Q, K, V, heads, window, s);
  return fused("causal_attention_heads", Q, K, V, s, sc, window,
               [heads, sc, window](const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& dO) {
                 return packed_formula(q, k, v, dO, heads, sc, window);
               }, where);
}

Tensor causal_attention_heads_composed(const Tensor& Q, const Tensor& K, const Tensor& V,
                                       int64_t heads, double sc, int64_t window) {
  Dims s{};
  check_packed(Q, K, V, heads, window, s);
  return packed_composed(Q, K, V, heads, sc, window);
}

// causal_attention_qkv: causal_attention_heads(Q, K, V) with [Q, K, V] = split(QKV, C, -1), the
// three read in place;  dQKV = cat(dQ, dK, dV), written in place by the fused backward (every
// element once: nothing to zero, nothing to add).
Tensor causal_attention_qkv(const Tensor& QKV, int64_t heads, double sc, int64_t window,
                            const std::source_location& where) {
  Dims s{};
  check_qkv(QKV, heads, window, s);
  const int64_t C = s.ldo;
  std::vector<int64_t> shape = QKV.shape().vec();
  shape.back() = C;
  Tensor O(Shape(shape), QKV.dtype());  // (.., T, C)
  const Kept kept = forward_all(QKV, QKV, QKV, O, s, sc, window,
                                is_grad_enabled() && detail::any_requires_grad({QKV}));
  return record("causal_attention_qkv", O, {QKV}, where)
      .saves(QKV)
      .formula([QKV, C, heads, sc, window](const Tensor& dO) {
        const std::vector<Tensor> qkv = split(QKV, C, -1);  // 3 x (.., T, C)
        const Grads g = packed_formula(qkv[0], qkv[1], qkv[2], dO, heads, sc, window);
        return Grads{cat({g[0], g[1], g[2]}, -1)};  // (.., T, 3C)
      })
      .kernel([QKV, kept, sc, window, s](const Tensor& dO, const Tensor& O) -> Grads {
        Tensor dQKV(QKV.shape(), QKV.dtype());
        backward_all(QKV, QKV, QKV, O, dO, kept, dQKV, dQKV, dQKV, s, sc, window);
        return {dQKV};
      });
}

namespace detail {
void set_attention_weights_limit(std::size_t bytes) { weights_limit.store(bytes); }
std::size_t attention_weights_limit() { return weights_limit.load(); }
}  // namespace detail

}  // namespace tg
