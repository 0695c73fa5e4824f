// matmul: Y = A' B' with A' = op(A), B' = op(B) (op = transpose of the last two axes or nothing)
//   dA' = dY B'^T,  dB' = A'^T dY, written as matmuls with flags so no transpose is copied:
//   dA = ta ? B' dY^T : dY B'^T          dB = tb ? dY^T A' : A'^T dY
//   then summed over broadcast batch axes: sum_to(., A.shape), sum_to(., B.shape).
//   tY = op(tA) B' + A' op(tB): matmuls with the same flags, each of Y's shape.

#include <tapegrad/ops/matmul.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

namespace {

using detail::view;

// The kernel for the common case, (..., M, K) @ (K, N) without transposed A: the formula's
// products straight into fresh buffers, the batch summed inside one product.
Grads backward_direct(const Tensor& A, const Tensor& B, bool tb, const Tensor& dY) {
  Tensor dA, dB;
  const int64_t rows = A.numel() / A.size(-1), K = A.size(-1), N = dY.size(-1);
  const int64_t rb = B.size(0), cb = B.size(1);
  dispatch(A.dtype(), [&]<class T>() {
    const T* a = A.data<T>();
    const T* b = B.data<T>();
    const T* dy = dY.data<T>();
    if (A.requires_grad()) {  // dA = dY B'^T
      dA = Tensor(A.shape(), A.dtype());
      detail::gemm<T>(view(dy, rows, N), view(b, rb, cb).t(!tb), view(dA.data<T>(), rows, K));
    }
    if (B.requires_grad()) {  // dB' = A^T dY over every row; dB = dB'^T when B' = B^T
      dB = Tensor(B.shape(), B.dtype());
      if (tb)
        detail::gemm<T>(view(dy, rows, N).t(), view(a, rows, K), view(dB.data<T>(), N, K));
      else
        detail::gemm<T>(view(a, rows, K).t(), view(dy, rows, N), view(dB.data<T>(), K, N));
    }
  });
  return {dA, dB};
}

std::string operand_str(const Tensor& t, bool tr) {
  return t.shape().str() + (tr ? "^T" : "");
}

}  // namespace

Tensor matmul(const Tensor& A, const Tensor& B, bool ta, bool tb, const std::source_location& where) {
  detail::check_same_dtype("matmul", A, B);
  if (A.rank() < 2 || B.rank() < 2)
    throw ShapeError("matmul: both operands need rank 2 or more: " + operand_str(A, ta) + " @ " +
                     operand_str(B, tb));
  const int64_t ra = A.size(-2), ca = A.size(-1), rb = B.size(-2), cb = B.size(-1);
  const int64_t M = ta ? ca : ra, K = ta ? ra : ca, Kb = tb ? cb : rb, N = tb ? rb : cb;
  if (K != Kb)
    throw ShapeError("matmul: inner dimensions differ: " + operand_str(A, ta) + " @ " +
                     operand_str(B, tb));
  int64_t dims[kMaxRank];
  for (int i = 0; i < A.rank() - 2; ++i) dims[i] = A.shape()[i];
  const Shape batch_a(dims, A.rank() - 2);
  for (int i = 0; i < B.rank() - 2; ++i) dims[i] = B.shape()[i];
  const Shape batch_b(dims, B.rank() - 2);
  Shape batch = batch_b.rank() == 0 ? batch_a : batch_b;  // the common case: no broadcasting
  if (batch_a.rank() > 0 && batch_b.rank() > 0 && !(batch_a == batch_b)) {
    try {
      batch = broadcast_shapes(batch_a, batch_b, "matmul");
    } catch (const ShapeError&) {
      throw ShapeError("matmul: batch axes do not broadcast: " + operand_str(A, ta) + " @ " +
                       operand_str(B, tb));
    }
  }
  const int ry = batch.rank() + 2;  // at most 6: the batch is at most as long as A's or B's
  for (int i = 0; i < batch.rank(); ++i) dims[i] = batch[i];
  dims[ry - 2] = M;
  dims[ry - 1] = N;
  Tensor Y(Shape(dims, ry), A.dtype());
  dispatch(A.dtype(), [&]<class T>() {
    const T* pa = A.data<T>();
    const T* pb = B.data<T>();
    T* py = Y.data<T>();
    if (Y.numel() == 0) return;
    if (K == 0) {
      detail::MapArr<T>(py, Y.numel()).setZero();
      return;
    }
    if (B.rank() == 2 && !ta) {  // (..., M, K) @ (K, N): one GEMM over all rows of A
      detail::gemm<T>(view(pa, A.numel() / ca, ca), view(pb, rb, cb).t(tb),
                      view(py, A.numel() / ca, N));
      return;
    }
    // One GEMM per batch entry; broadcast strides count whole matrices.
    const auto sa = broadcast_strides(batch_a, batch), sb = broadcast_strides(batch_b, batch);
    const int64_t nb = batch.numel();
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rest = i, oa = 0, ob = 0;
      for (int d = batch.rank() - 1; d >= 0; --d) {
        const int64_t k = rest % batch[d];
        rest /= batch[d];
        oa += k * sa[d];
        ob += k * sb[d];
      }
      detail::gemm<T>(view(pa + oa * ra * ca, ra, ca).t(ta), view(pb + ob * rb * cb, rb, cb).t(tb),
                      view(py + i * M * N, M, N));
    }
  });
  return record("matmul", std::move(Y), {A, B}, where)
      .saves(A, B)
      .formula([A, B, ta, tb](const Tensor& dY) -> Grads {
        Tensor dA, dB;
        if (A.requires_grad())
          dA = sum_to(ta ? matmul(B, dY, tb, true) : matmul(dY, B, false, !tb), A.shape());
        if (B.requires_grad()) {
          if (B.rank() == 2 && A.rank() > 2 && !ta) {  // sum over the batch inside one GEMM
            const Tensor A2 = reshape(A, {-1, A.size(-1)}), dY2 = reshape(dY, {-1, dY.size(-1)});
            dB = tb ? matmul(dY2, A2, true, false) : matmul(A2, dY2, true, false);
          } else {
            dB = sum_to(tb ? matmul(dY, A, true, ta) : matmul(A, dY, !ta, false), B.shape());
          }
        }
        return {dA, dB};
      })
      .kernel([A, B, ta, tb](const Tensor& dY) -> Grads {
        if (B.rank() == 2 && !ta && A.size(-1) > 0) return backward_direct(A, B, tb, dY);
        // Other layouts: the formula's products, unrecorded (the engine runs kernels in no-grad).
        Tensor dA, dB;
        if (A.requires_grad())
          dA = sum_to(ta ? matmul(B, dY, tb, true) : matmul(dY, B, false, !tb), A.shape());
        if (B.requires_grad())
          dB = sum_to(tb ? matmul(dY, A, true, ta) : matmul(A, dY, !ta, false), B.shape());
        return {dA, dB};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        const Tensor tA_B = detail::tangent_term(t[0], [&](const Tensor& tA) {
          return matmul(tA, B, ta, tb);
        });
        const Tensor A_tB = detail::tangent_term(t[1], [&](const Tensor& tB) {
          return matmul(A, tB, ta, tb);
        });
        return detail::tangent_sum(tA_B, A_tB, Y.shape());
      });
}

}  // namespace tg
