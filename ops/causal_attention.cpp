// causal_attention, fused: O = softmax(Q K^T scale + M) V per (batch, head) entry, M causal with
// query i at position query_offset + i (it sees keys j <= query_offset + i; with a window w only
// j > query_offset + i - w). The derivative, as the formula (what create_graph records):
//   A = softmax(Q K^T scale + M), recomputed with ops (ops/attention_composed.h)
//   dV = A^T dO;  dA = dO V^T;  dS = A * (dA - rowsum(dA * A));  dQ = dS K scale;
//   dK = dS^T Q scale
// and as the kernel: the same per block of 64 query rows, never forming A, from the forward's
// log-sum-exps (ops/attention_kernels.h). The same kernels serve three layouts: separate
// (..., T, d) operands, heads packed along the last axis (causal_attention_heads), and Q, K, V
// side by side in one (..., T, 3C) projection (causal_attention_qkv), whose backward writes
// dQ, dK, dV into one gradient. The tangent rule (forward mode), in ops from A recomputed as in
// the formula:
//   tS = (tQ K^T + Q tK^T) scale;  tA = A * (tS - rowsum(tS * A));  tO = tA V + A tV
// (A is exactly 0 where masked, so tA is too: masked entries have no tangent); and, when nothing
// will differentiate the rule, by the kernels with the forward in one pass.

#include <tapegrad/ops/causal_attention.h>

#include <initializer_list>
#include <string>
#include <vector>

#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/add_mask.h>
#include <tapegrad/ops/attention_kernels.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

namespace {

using detail::AttentionDims;

// How the operands lie: separate Q, K, V; H heads packed along their last axes; or one
// (..., T, 3 H d) projection passed as Q, K and V.
enum class Layout { separate, heads, qkv };

// t's shape with `rows` on axis -2.
Shape with_rows(const Tensor& t, int64_t rows) {
  int64_t dims[kMaxRank];
  for (int a = 0; a < t.rank(); ++a) dims[a] = t.shape()[a];
  dims[t.rank() - 2] = rows;
  return Shape(dims, t.rank());
}

// The shape rule of a layout, for its error messages.
std::string rule(Layout layout, int64_t query_offset) {
  if (layout == Layout::qkv) return "QKV must be (T, 3 H d) or (B, T, 3 H d)";
  const std::string r = layout == Layout::heads
                            ? "Q and K must be (T, H d) or (B, T, H d) and V (T, H d_v) or "
                              "(B, T, H d_v)"
                            : "Q and K must be (..., T, d) and V (..., T, d_v)";
  return query_offset ? r + ", K and V with query_offset + T rows" : r;
}

// Which axis breaks the layout, said plainly: a rank out of range, ranks that differ, or the
// first axis where K leaves Q's shape (T_k = query_offset + T rows) or V leaves K's.
template <class Fail>
void check_axes(const Tensor& Q, const Tensor& K, const Tensor& V, bool packed,
                int64_t query_offset, Fail&& fail) {
  const int r = Q.rank(), max_rank = packed ? 3 : kMaxRank;
  if (r < 2 || r > max_rank)
    fail("Q must have rank 2 to " + std::to_string(max_rank) + ", got rank " + std::to_string(r));
  if (K.rank() != r || V.rank() != r)
    fail("Q, K and V must have the same rank, got ranks " + std::to_string(r) + ", " +
         std::to_string(K.rank()) + " and " + std::to_string(V.rank()));
  auto axis = [r](int a) {
    return "axis " + std::to_string(a - r) + (a == r - 2 ? " (T)" : a == r - 1 ? " (d)" : "");
  };
  const int64_t T = Q.size(-2), T_k = query_offset + T;
  for (int a = 0; a < r; ++a) {
    const int64_t want = a == r - 2 ? T_k : Q.shape()[a];
    if (K.shape()[a] == want) continue;
    if (a == r - 2)
      fail("K must have " +
           (query_offset ? "query_offset + T = " + std::to_string(query_offset) + " + " +
                               std::to_string(T) + " = " + std::to_string(T_k)
                         : "Q's T = " + std::to_string(T)) +
           " rows on " + axis(a) + ", got " + std::to_string(K.shape()[a]));
    fail("Q and K differ on " + axis(a) + ": " + std::to_string(Q.shape()[a]) + " and " +
         std::to_string(K.shape()[a]));
  }
  for (int a = 0; a < r - 1; ++a)
    if (V.shape()[a] != K.shape()[a])
      fail("V must share K's " + axis(a) + ", " + std::to_string(K.shape()[a]) + ", got " +
           std::to_string(V.shape()[a]));
}

// The one shape check of the three layouts, and the kernels' dims from it: K is Q's shape but
// for its T_k = query_offset + T rows, V shares K's axes but the last.
AttentionDims check_layout(Layout layout, const Tensor& Q, const Tensor& K, const Tensor& V,
                           int64_t heads, int64_t window, int64_t query_offset) {
  const bool qkv = layout == Layout::qkv, packed = layout != Layout::separate;
  const char* op = qkv      ? "causal_attention_qkv"
                   : packed ? "causal_attention_heads"
                            : "causal_attention";
  if (qkv) {
    detail::check_floating(op, Q);
  } else {
    detail::check_same_dtype(op, Q, K);
    detail::check_same_dtype(op, Q, V);
  }
  auto fail = [&](const std::string& why) {
    std::string shapes = Q.shape().str();
    if (!qkv) shapes += ", " + K.shape().str() + ", " + V.shape().str();
    if (packed) shapes += " with " + std::to_string(heads) + " heads";
    throw ShapeError(std::string(op) + ": " + why + ", got " + shapes);
  };
  if (packed && heads < 1)
    throw ValueError(std::string(op) + ": heads must be at least 1, got " +
                     std::to_string(heads));
  check_axes(Q, K, V, packed, query_offset, [&](const std::string& why) {
    fail(why + " (" + rule(layout, query_offset) + ")");
  });
  if (qkv && Q.size(-1) % (3 * heads) != 0) fail("3 x heads must divide the last axis");
  if (layout == Layout::heads && (Q.size(-1) % heads != 0 || V.size(-1) % heads != 0))
    fail("the heads must divide the last axes");
  detail::check_causal_mask(op, window, query_offset);

  AttentionDims s;
  s.T = Q.size(-2);
  s.T_k = query_offset + s.T;
  s.window = window;
  s.query_offset = query_offset;
  s.N = 1;
  for (int a = 0; a < Q.rank() - 2; ++a) s.N *= Q.shape()[a];
  if (!packed) {
    s.d = s.ldq = Q.size(-1);
    s.dv = s.ldv = s.ldo = V.size(-1);
    return s;
  }
  s.H = heads;
  s.N *= heads;
  if (qkv) {
    const int64_t C = Q.size(-1) / 3;
    s.ldq = s.ldv = 3 * C;
    s.ldo = C;
    s.k_col = C;
    s.v_col = 2 * C;
    s.d = s.dv = C / heads;
  } else {
    s.ldq = Q.size(-1);
    s.ldv = s.ldo = V.size(-1);
    s.d = s.ldq / heads;
    s.dv = s.ldv / heads;
  }
  return s;
}

// The derivative formula, in ops: the weights recomputed, then
//   dV = A^T dO;  dA = dO V^T;  dS = A * (dA - rowsum(dA * A));  dQ = dS K sc;  dK = dS^T Q sc
Grads attention_formula(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO,
                        const AttentionDims& s, double sc) {
  const Tensor A = causal_attention_weights(Q, K, sc, s.window, s.query_offset).A;  // (.., T, T_k)
  const Tensor dA = matmul(dO, V, false, true);                                   // (.., T, T_k)
  const Tensor dS = mul(A, sub(dA, sum(mul(dA, A), -1, true)));                   // (.., T, T_k)
  return {scale(matmul(dS, K), sc), scale(matmul(dS, Q, true, false), sc),       // dQ, dK
          matmul(A, dO, true, false)};                                            // dV
}

// The same for s.H heads packed along the last axis: split, differentiate per head, merge.
Grads heads_formula(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO,
                    const AttentionDims& s, double sc) {
  const int64_t H = s.H;
  const Grads g = attention_formula(split_heads(Q, H), split_heads(K, H), split_heads(V, H),
                                    split_heads(dO, H), s, sc);
  const bool batched = Q.rank() == 3;
  return {merge_heads(g[0], batched), merge_heads(g[1], batched), merge_heads(g[2], batched)};
}

// The tangent rule, in ops: the weights recomputed as in the formula, then
//   tS = (tQ K^T + Q tK^T) sc;  tA = A * (tS - rowsum(tS * A));  tO = tA V + A tV
// with a term only for each tangent there is (an undefined one is zero).
Tensor attention_tangent(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& tQ,
                         const Tensor& tK, const Tensor& tV, const AttentionDims& s, double sc) {
  using detail::tangent_sum, detail::tangent_term;
  const Tensor A = causal_attention_weights(Q, K, sc, s.window, s.query_offset).A;  // (.., T, T_k)
  const Tensor tQK = tangent_term(tQ, [&](const Tensor& t) { return matmul(t, K, false, true); });
  const Tensor QtK = tangent_term(tK, [&](const Tensor& t) { return matmul(Q, t, false, true); });
  const Tensor tS = tangent_term(tangent_sum(tQK, QtK, A.shape()),
                                 [sc](const Tensor& t) { return scale(t, sc); });  // (.., T, T_k)
  const Tensor tO_A = tangent_term(tS, [&](const Tensor& t) {
    return matmul(mul(A, sub(t, sum(mul(t, A), -1, true))), V);                  // tA V
  });
  const Tensor tO_V = tangent_term(tV, [&](const Tensor& t) { return matmul(A, t); });  // A tV
  return tangent_sum(tO_A, tO_V, with_rows(V, s.T));                             // (.., T, d_v)
}

// The same for s.H heads packed along the last axis: split (tangents too), per head, merge.
Tensor heads_tangent(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& tQ,
                     const Tensor& tK, const Tensor& tV, const AttentionDims& s, double sc) {
  const int64_t H = s.H;
  auto split_t = [H](const Tensor& t) {
    return detail::tangent_term(t, [H](const Tensor& x) { return split_heads(x, H); });
  };
  const Tensor tO = attention_tangent(split_heads(Q, H), split_heads(K, H), split_heads(V, H),
                                      split_t(tQ), split_t(tK), split_t(tV), s, sc);
  return detail::tangent_term(tO, [&](const Tensor& t) { return merge_heads(t, Q.rank() == 3); });
}

// What the fused forward keeps for the fused backward, laid out by detail::kept_layout.
struct Kept {
  Tensor buf;
  detail::KeptLayout layout;
};

// O = the attention of every entry, Q, K and V read at the offsets and strides of `s` (they
// may be one tensor: the packed projection). The fused forward kernel.
Kept forward_all(const Tensor& Q, const Tensor& K, const Tensor& V, Tensor& O,
                 const AttentionDims& s, double sc, bool backward_coming) {
  Kept kept{Tensor(), detail::kept_layout(s, dtype_size(Q.dtype()), backward_coming)};
  kept.buf = Tensor(Shape{kept.layout.total(s.N)}, Q.dtype());
  dispatch(Q.dtype(), [&]<class T>() {
    detail::attention_forward<T>(s, static_cast<T>(sc), {Q.data<T>(), K.data<T>(), V.data<T>()},
                                 O.data<T>(), kept.buf.data<T>(), kept.layout);
  });
  return kept;
}

// dQ, dK, dV of every entry from dO (laid out like O), written at the offsets and strides of
// `s` (they may be one tensor: every element of the packed gradient is written, none added).
// The fused backward kernel, reusing the forward's log-sum-exps (and weights, when kept).
void backward_all(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& dO,
                  const Kept& kept, Tensor& dQ, Tensor& dK, Tensor& dV, const AttentionDims& s,
                  double sc) {
  dispatch(Q.dtype(), [&]<class T>() {
    detail::attention_backward<T>(s, static_cast<T>(sc), {Q.data<T>(), K.data<T>(), V.data<T>()},
                                  dO.data<T>(), kept.buf.data<T>(), kept.layout,
                                  {dQ.data<T>(), dK.data<T>(), dV.data<T>()});
  });
}

// Forward mode with nothing to differentiate the rule (detail::tangent_records; so no backward
// either): the inputs' tangents, for the forward and the tangent kernel in one pass. Else none.
struct DualTangents {
  Tensor q, k, v;
  bool on = false;
};

DualTangents dual_tangents(const Tensor& Q, const Tensor& K, const Tensor& V) {
  if (!detail::forward_level()) return {};
  DualTangents t{detail::tangent_of(Q), detail::tangent_of(K), detail::tangent_of(V)};
  t.on = (t.q.defined() || t.k.defined() || t.v.defined()) &&
         !detail::tangent_records({Q, K, V, t.q, t.k, t.v});
  return t;
}

// O and tO (of O's shape) in one pass: the fused forward and tangent kernels as one. Nothing
// is kept: no node is recorded, so no backward follows.
void forward_tangent_all(const Tensor& Q, const Tensor& K, const Tensor& V, const DualTangents& t,
                         Tensor& O, Tensor& tO, const AttentionDims& s, double sc) {
  tO = Tensor(O.shape(), O.dtype());
  dispatch(Q.dtype(), [&]<class T>() {
    auto at = [](const Tensor& x) { return x.defined() ? x.data<T>() : nullptr; };
    detail::attention_forward_tangent<T>(s, static_cast<T>(sc),
                                         {Q.data<T>(), K.data<T>(), V.data<T>()},
                                         {at(t.q), at(t.k), at(t.v)}, O.data<T>(), tO.data<T>());
  });
}

// The forward of every entry, and with dual tangents the tangent too (into tO).
Kept forward_or_dual(const Tensor& Q, const Tensor& K, const Tensor& V, Tensor& O, Tensor& tO,
                     const AttentionDims& s, double sc) {
  const DualTangents t = dual_tangents(Q, K, V);
  if (t.on) {
    forward_tangent_all(Q, K, V, t, O, tO, s, sc);
    return Kept{};  // empty: a dual pass records no node
  }
  return forward_all(Q, K, V, O, s, sc,
                     is_grad_enabled() && detail::any_requires_grad({Q, K, V}));
}

// Runs the fused kernels on separate Q, K, V and records the derivative: `formula` in ops, and
// the fused backward kernel; `tangent`, the tangent rule.
template <class Formula, class Tangent>
Tensor fused(const char* op, const Tensor& Q, const Tensor& K, const Tensor& V,
             const AttentionDims& s, double sc, Formula formula, Tangent tangent,
             const std::source_location& where) {
  Tensor O(with_rows(V, s.T), Q.dtype()), tO;  // (.., T, d_v)
  const Kept kept = forward_or_dual(Q, K, V, O, tO, s, sc);
  return record(op, std::move(O), {Q, K, V}, where)
      .saves(Q, K, V)
      .formula([Q, K, V, s, sc, formula](const Tensor& dO) { return formula(Q, K, V, dO, s, sc); })
      .kernel([Q, K, V, kept, s, sc](const Tensor& dO) -> Grads {
        Tensor dQ(Q.shape(), Q.dtype()), dK(K.shape(), K.dtype()), dV(V.shape(), V.dtype());
        backward_all(Q, K, V, dO, kept, dQ, dK, dV, s, sc);
        return {dQ, dK, dV};
      })
      .jvp([&](const Tangents& t) {  // tO
        if (tO.defined()) return tO;  // made with O by the kernels
        return tangent(Q, K, V, t[0], t[1], t[2], s, sc);
      });
}

}  // namespace

Tensor causal_attention(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                        int64_t window, int64_t query_offset, const std::source_location& where) {
  const AttentionDims s = check_layout(Layout::separate, Q, K, V, 1, window, query_offset);
  return fused("causal_attention", Q, K, V, s, sc, attention_formula, attention_tangent,
               where);
}

Tensor causal_attention_composed(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                                 int64_t window, int64_t query_offset) {
  check_layout(Layout::separate, Q, K, V, 1, window, query_offset);
  const Tensor A = causal_attention_weights(Q, K, sc, window, query_offset).A;  // (.., T, T_k)
  return matmul(A, V);                                                          // (.., T, d_v)
}

Tensor causal_attention_heads(const Tensor& Q, const Tensor& K, const Tensor& V, int64_t heads,
                              double sc, int64_t window, int64_t query_offset,
                              const std::source_location& where) {
  const AttentionDims s = check_layout(Layout::heads, Q, K, V, heads, window, query_offset);
  return fused("causal_attention_heads", Q, K, V, s, sc, heads_formula, heads_tangent, where);
}

Tensor causal_attention_heads_composed(const Tensor& Q, const Tensor& K, const Tensor& V,
                                       int64_t heads, double sc, int64_t window,
                                       int64_t query_offset) {
  check_layout(Layout::heads, Q, K, V, heads, window, query_offset);
  const Tensor A = causal_attention_weights(split_heads(Q, heads), split_heads(K, heads), sc,
                                            window, query_offset)
                       .A;                                           // (B, H, T, T_k)
  return merge_heads(matmul(A, split_heads(V, heads)), Q.rank() == 3);  // (.., T, H d_v)
}

// causal_attention_qkv: causal_attention_heads(Q, K, V) with [Q, K, V] = split(QKV, C, -1), the
// three read in place;  dQKV = cat(dQ, dK, dV), written in place by the fused backward (every
// element once: nothing to zero, nothing to add).
Tensor causal_attention_qkv(const Tensor& QKV, int64_t heads, double sc, int64_t window,
                            const std::source_location& where) {
  const AttentionDims s = check_layout(Layout::qkv, QKV, QKV, QKV, heads, window, 0);
  const int64_t C = s.ldo;
  std::vector<int64_t> shape = QKV.shape().vec();
  shape.back() = C;
  Tensor O(Shape(shape), QKV.dtype()), tO;  // (.., T, C)
  const Kept kept = forward_or_dual(QKV, QKV, QKV, O, tO, s, sc);
  return record("causal_attention_qkv", std::move(O), {QKV}, where)
      .saves(QKV)
      .formula([QKV, C, s, sc](const Tensor& dO) {
        const std::vector<Tensor> qkv = split(QKV, C, -1);  // 3 x (.., T, C)
        const Grads g = heads_formula(qkv[0], qkv[1], qkv[2], dO, s, sc);
        return Grads{cat({g[0], g[1], g[2]}, -1)};  // (.., T, 3C)
      })
      .kernel([QKV, kept, s, sc](const Tensor& dO) -> Grads {
        Tensor dQKV(QKV.shape(), QKV.dtype());
        backward_all(QKV, QKV, QKV, dO, kept, dQKV, dQKV, dQKV, s, sc);
        return {dQKV};
      })
      .jvp([&](const Tangents& t) {
        if (tO.defined()) return tO;  // made with O by the kernels
        const std::vector<Tensor> qkv = split(QKV, C, -1), tqkv = split(t[0], C, -1);
        return heads_tangent(qkv[0], qkv[1], qkv[2], tqkv[0], tqkv[1], tqkv[2], s, sc);
      });
}

}  // namespace tg
