#pragma once
// The one matrix-multiply kernel every op uses (internal, not installed):
//   Y = alpha op(A) op(B) + beta Y,  row-major, op = transpose or nothing.
// Large products go to BLIS when the build has it (TAPEGRAD_BLAS): it is 1.4-1.7x faster than
// Eigen's GEMM on our machines, re-entrant (threads may multiply at once), and told per call how
// many threads to use: one inside our parallel regions, detail::team_size() outside them (the
// cores other processes leave free, ops/threads.h). Medium ones
// stay in Eigen, and tiny ones are plain loops with no setup cost at all.

#include <cmath>
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

/// a b + c exactly as the tiny products compute each step (one rounding where the CPU has FMA),
/// for sums that must agree with them to the last bit.
template <class T>
inline T madd(T a, T b, T c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// Whether products go to BLIS in this build.
bool have_blas();

}  // namespace tg::detail
