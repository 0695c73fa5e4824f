// matmul: Y = A' B' with A' = op(A), B' = op(B) (op = transpose of the last two axes or nothing)
//   dA' = dY B'^T,  dB' = A'^T dY, written as matmuls with flags so no transpose is copied:
//   dA = ta ? B' dY^T : dY B'^T          dB = tb ? dY^T A' : A'^T dY
//   then summed over broadcast batch axes: sum_to(., A.shape), sum_to(., B.shape).

#include "ops/matmul.h"

#include "autograd/node.h"
#include "ops/op_util.h"
#include "ops/reshape.h"
#include "ops/sum_to.h"

namespace tg {

namespace {

template <class T>
void gemm(const T* a, int64_t ra, int64_t ca, bool ta, const T* b, int64_t rb, int64_t cb,
          bool tb, T* y) {
  detail::CMapMat<T> A(a, ra, ca), B(b, rb, cb);
  const int64_t M = ta ? ca : ra, N = tb ? rb : cb;
  detail::MapMat<T> Y(y, M, N);
  // Eigen's blocked GEMM has a fixed setup cost (and allocates); tiny products go coefficient-wise.
  const bool tiny = M * N * (ta ? ra : ca) <= 16 * 16 * 16;
  if (!ta && !tb) tiny ? Y.noalias() = A.lazyProduct(B) : Y.noalias() = A * B;
  else if (ta && !tb) tiny ? Y.noalias() = A.transpose().lazyProduct(B) : Y.noalias() = A.transpose() * B;
  else if (!ta && tb) tiny ? Y.noalias() = A.lazyProduct(B.transpose()) : Y.noalias() = A * B.transpose();
  else tiny ? Y.noalias() = A.transpose().lazyProduct(B.transpose()) : Y.noalias() = A.transpose() * B.transpose();
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
  std::vector<int64_t> ba = A.shape().vec(), bb = B.shape().vec();
  ba.resize(ba.size() - 2);
  bb.resize(bb.size() - 2);
  const Shape batch_a(ba), batch_b(bb);
  Shape batch;
  try {
    batch = broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError("matmul: batch axes do not broadcast: " + operand_str(A, ta) + " @ " +
                     operand_str(B, tb));
  }
  std::vector<int64_t> dy = batch.vec();
  dy.push_back(M);
  dy.push_back(N);
  Tensor Y(Shape(dy), A.dtype());
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
      gemm<T>(pa, A.numel() / ca, ca, false, pb, rb, cb, tb, py);
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
      gemm<T>(pa + oa * ra * ca, ra, ca, ta, pb + ob * rb * cb, rb, cb, tb, py + i * M * N);
    }
  });
  return record("matmul", Y, {A, B}, [A, B, ta, tb](const Tensor& dY) -> Grads {
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
  }, where);
}

}  // namespace tg
