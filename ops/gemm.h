#pragma once
// The one matrix-multiply kernel every op uses (internal, not installed):
//   Y = alpha op(A) op(B) + beta Y,  row-major, op = transpose or nothing.
// Large products go to OpenBLAS when the build has it (TAPEGRAD_BLAS): it is 1.6-1.9x faster
// than Eigen's GEMM on our machines and uses the same OpenMP runtime, so it runs on one thread
// inside our parallel regions and on every thread outside them. Small ones stay in Eigen, and
// tiny ones use a coefficient-wise product with no setup cost at all.

#include <cstdint>

namespace tg::detail {

/// A is (ra, ca) with row stride lda, B is (rb, cb) with row stride ldb, Y is (M, N) with row
/// stride ldy, where M = ta ? ca : ra and N = tb ? rb : cb. The caller checks the shapes.
template <class T>
void gemm(const T* a, int64_t ra, int64_t ca, int64_t lda, bool ta, const T* b, int64_t rb,
          int64_t cb, int64_t ldb, bool tb, T* y, int64_t ldy, T alpha = T(1), T beta = T(0));

/// Contiguous operands (lda = ca, ldb = cb, ldy = N), Y overwritten.
template <class T>
void gemm(const T* a, int64_t ra, int64_t ca, bool ta, const T* b, int64_t rb, int64_t cb,
          bool tb, T* y) {
  gemm<T>(a, ra, ca, ca, ta, b, rb, cb, cb, tb, y, tb ? rb : cb);
}

/// Whether products go to OpenBLAS in this build.
bool have_blas();

}  // namespace tg::detail
