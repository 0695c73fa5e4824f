// causal_attention, fused (FlashAttention's scheme, on the CPU):
//   forward, per block of query rows i and key columns j (only blocks with a visible entry):
//     S = Q_i K_j^T scale + M;  m' = max(m, rowmax S);  P = exp(S - m')
//     l = l exp(m - m') + rowsum P;  acc = acc exp(m - m') + P V_j;  m = m'
//     O_i = acc / l;  lse_i = m + log l                     (saved: lse, not the (T, T) weights)
//   backward, with D_i = rowsum(dO_i * O_i) and P = exp(S - lse_i) recomputed per block:
//     dV_j += P^T dO_i;  dP = dO_i V_j^T;  dS = P * (dP - D_i)
//     dQ_i += dS K_j scale;  dK_j += dS^T Q_i scale
//   Row i always sees itself (j = i), so l > 0 and lse is finite.

#include "ops/causal_attention.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "ops/add_mask.h"
#include "ops/matmul.h"
#include "ops/op_util.h"
#include "ops/scale.h"
#include "ops/softmax.h"

namespace tg {

namespace {

constexpr int64_t kBlock = 64;

// dst = a * b: Eigen's blocked GEMM pays a fixed setup (and a malloc) that dominates tiny
// products, so small ones use the coefficient-based product.
template <class Dst, class A, class B>
void product(Dst& dst, const A& a, const B& b) {
  if (a.rows() * a.cols() * b.cols() <= 16 * 16 * 16)
    dst.noalias() = a.lazyProduct(b);
  else
    dst.noalias() = a * b;
}

// Runs body(n) for n in [0, N): in parallel over OpenMP threads when the work (about
// N T^2 d multiply-adds) pays for starting a thread team, directly otherwise. Each entry is
// computed the same way either way, so results do not depend on the thread count.
template <class F>
void for_each_entry(int64_t N, int64_t work, F&& body) {
  if (N == 1 || work < (int64_t{1} << 18)) {
    for (int64_t n = 0; n < N; ++n) body(n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) body(n);
}

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

struct Dims {
  int64_t N, T, d, dv;  // N = batch x heads
};

// Visible key range [lo, hi) of query rows [i0, i1): causal, and the window's left edge.
inline void key_range(int64_t i0, int64_t i1, int64_t window, int64_t& lo, int64_t& hi) {
  hi = i1;
  lo = window > 0 ? std::max<int64_t>(0, i0 - window + 1) : 0;
}

// Sets S[r, c] (query i0 + r, key j0 + c) to -inf where the mask hides it.
template <class T>
void mask_block(Mat<T>& S, int64_t i0, int64_t j0, int64_t window) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < S.rows(); ++r) {
    const int64_t i = i0 + r;
    for (int64_t c = 0; c < S.cols(); ++c) {
      const int64_t j = j0 + c;
      if (j > i || (window > 0 && j <= i - window)) S(r, c) = ninf;
    }
  }
}

inline bool needs_mask(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t window) {
  return j1 - 1 > i0 || (window > 0 && j0 <= i1 - 1 - window);
}

template <class T>
void forward_one(const T* q, const T* k, const T* v, T* o, T* lse, const Dims& s, T sc,
                 int64_t window) {
  using CMap = Eigen::Map<const Mat<T>>;
  thread_local Mat<T> S, acc;  // scratch, reused across calls (no allocation in a steady loop)
  thread_local Vec<T> m, l, m_new;
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const int64_t i1 = std::min(s.T, i0 + kBlock), br = i1 - i0;
    CMap Qi(q + i0 * s.d, br, s.d);
    m.setConstant(br, -std::numeric_limits<T>::infinity());
    l.setZero(br);
    acc.setZero(br, s.dv);
    int64_t lo, hi;
    key_range(i0, i1, window, lo, hi);
    for (int64_t j0 = lo - lo % kBlock; j0 < hi; j0 += kBlock) {
      const int64_t j1 = std::min(s.T, j0 + kBlock), bc = j1 - j0;
      product(S, Qi, CMap(k + j0 * s.d, bc, s.d).transpose());  // (br, bc)
      S *= sc;
      if (needs_mask(i0, i1, j0, j1, window)) mask_block(S, i0, j0, window);
      m_new = m.cwiseMax(S.rowwise().maxCoeff());
      for (int64_t r = 0; r < br; ++r) {
        if (m_new(r) == -std::numeric_limits<T>::infinity()) {  // nothing visible yet
          S.row(r).setZero();
          continue;
        }
        const T alpha = std::exp(m(r) - m_new(r));  // exp(-inf) = 0 on the first block
        S.row(r) = (S.row(r).array() - m_new(r)).exp();
        for (int64_t c = 0; c < bc; ++c)  // masked entries: exactly 0, whatever exp returns
          if (j0 + c > i0 + r || (window > 0 && j0 + c <= i0 + r - window)) S(r, c) = 0;
        l(r) = l(r) * alpha + S.row(r).sum();
        acc.row(r) *= alpha;
      }
      thread_local Mat<T> PV;
      product(PV, S, CMap(v + j0 * s.dv, bc, s.dv));  // (br, dv)
      acc += PV;
      m = m_new;
    }
    Eigen::Map<Mat<T>>(o + i0 * s.dv, br, s.dv) = acc.array().colwise() / l.array();
    for (int64_t r = 0; r < br; ++r) lse[i0 + r] = m(r) + std::log(l(r));
  }
}

template <class T>
void backward_one(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout,
                  T* dq, T* dk, T* dv, const Dims& s, T sc, int64_t window) {
  using CMap = Eigen::Map<const Mat<T>>;
  using Map = Eigen::Map<Mat<T>>;
  Map dQ(dq, s.T, s.d), dK(dk, s.T, s.d), dV(dv, s.T, s.dv);
  dQ.setZero();
  dK.setZero();
  dV.setZero();
  // D_i = sum_c dO_ic O_ic
  thread_local Vec<T> D;
  D = (CMap(dout, s.T, s.dv).array() * CMap(o, s.T, s.dv).array()).rowwise().sum();
  thread_local Mat<T> P, dP, tmp_v, tmp_q, tmp_k;
  for (int64_t i0 = 0; i0 < s.T; i0 += kBlock) {
    const int64_t i1 = std::min(s.T, i0 + kBlock), br = i1 - i0;
    CMap Qi(q + i0 * s.d, br, s.d), dOi(dout + i0 * s.dv, br, s.dv);
    int64_t lo, hi;
    key_range(i0, i1, window, lo, hi);
    for (int64_t j0 = lo - lo % kBlock; j0 < hi; j0 += kBlock) {
      const int64_t j1 = std::min(s.T, j0 + kBlock), bc = j1 - j0;
      CMap Kj(k + j0 * s.d, bc, s.d), Vj(v + j0 * s.dv, bc, s.dv);
      product(P, Qi, Kj.transpose());  // (br, bc)
      for (int64_t r = 0; r < br; ++r)
        P.row(r).array() = (P.row(r).array() * sc - lse[i0 + r]).exp();
      if (needs_mask(i0, i1, j0, j1, window)) {
        for (int64_t r = 0; r < br; ++r)
          for (int64_t c = 0; c < bc; ++c)
            if (j0 + c > i0 + r || (window > 0 && j0 + c <= i0 + r - window)) P(r, c) = 0;
      }
      product(tmp_v, P.transpose(), dOi);  // (bc, dv)
      dV.middleRows(j0, bc) += tmp_v;
      product(dP, dOi, Vj.transpose());  // (br, bc)
      dP = P.array() * (dP.array().colwise() - D.segment(i0, br).array()) * sc;  // dS scale
      product(tmp_q, dP, Kj);  // (br, d)
      dQ.middleRows(i0, br) += tmp_q;
      product(tmp_k, dP.transpose(), Qi);  // (bc, d)
      dK.middleRows(j0, bc) += tmp_k;
    }
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
  s.N = s.T ? Q.numel() / (s.T * std::max<int64_t>(s.d, 1)) : 0;
  if (s.d == 0) s.N = Q.numel() == 0 && s.T ? V.numel() / (s.T * std::max<int64_t>(s.dv, 1)) : 0;
}

}  // namespace

Tensor causal_attention_composed(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                                 int64_t window) {
  Dims s{};
  check_inputs(Q, K, V, window, s);
  const Tensor S = scale(matmul(Q, K, false, true), sc);                         // (.., T, T)
  return matmul(softmax(add_mask(S, causal_mask(s.T, Q.dtype(), window))), V);  // (.., T, d_v)
}

Tensor causal_attention(const Tensor& Q, const Tensor& K, const Tensor& V, double sc,
                        int64_t window, const std::source_location& where) {
  Dims s{};
  check_inputs(Q, K, V, window, s);
  Tensor O(V.shape(), Q.dtype());
  std::vector<int64_t> lse_shape = Q.shape().vec();
  lse_shape.pop_back();
  Tensor lse(Shape(lse_shape), Q.dtype());
  dispatch(Q.dtype(), [&]<class T>() {
    const T* q = Q.data<T>();
    const T* k = K.data<T>();
    const T* v = V.data<T>();
    T* o = O.data<T>();
    T* l = lse.data<T>();
    for_each_entry(s.N, s.N * s.T * s.T * (s.d + s.dv), [&](int64_t n) {
      forward_one<T>(q + n * s.T * s.d, k + n * s.T * s.d, v + n * s.T * s.dv, o + n * s.T * s.dv,
                     l + n * s.T, s, static_cast<T>(sc), window);
    });
  });
  return record("causal_attention", O, {Q, K, V},
                [Q, K, V, lse, sc, window, s](const Tensor& dO, const Tensor& O) -> Grads {
    if (is_grad_enabled()) {  // create_graph: differentiate the composed ops instead
      const Tensor ref = causal_attention_composed(Q, K, V, sc, window);
      std::vector<Tensor> in, g;
      for (const Tensor& t : {Q, K, V})
        if (t.requires_grad()) in.push_back(t);
      g = grad({ref}, in, {dO}, /*create_graph=*/true);
      Grads out;
      std::size_t next = 0;
      for (int i = 0; i < 3; ++i)
        if ((i == 0 ? Q : i == 1 ? K : V).requires_grad()) out[i] = g[next++];
      return out;
    }
    Tensor dQ(Q.shape(), Q.dtype()), dK(K.shape(), K.dtype()), dV(V.shape(), V.dtype());
    dispatch(Q.dtype(), [&]<class T>() {
      const T* q = Q.data<T>();
      const T* k = K.data<T>();
      const T* v = V.data<T>();
      const T* o = O.data<T>();
      const T* l = lse.data<T>();
      const T* d = dO.data<T>();
      for_each_entry(s.N, s.N * s.T * s.T * (s.d + s.dv), [&](int64_t n) {
        backward_one<T>(q + n * s.T * s.d, k + n * s.T * s.d, v + n * s.T * s.dv,
                        o + n * s.T * s.dv, l + n * s.T, d + n * s.T * s.dv,
                        dQ.data<T>() + n * s.T * s.d, dK.data<T>() + n * s.T * s.d,
                        dV.data<T>() + n * s.T * s.dv, s, static_cast<T>(sc), window);
      });
    });
    return {dQ, dK, dV};
  }, where);
}

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: needs at least 1 thread, got " + std::to_string(n));
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace tg
