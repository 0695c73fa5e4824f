#include "ops/gemm.h"

#include <Eigen/Core>
#include <climits>

#ifdef TAPEGRAD_HAVE_BLAS
#include <blis.h>
#include <omp.h>
#endif

namespace tg::detail {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using Map = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

// Below this many multiply-adds Eigen's coefficient-wise product wins: no packing, no setup.
constexpr int64_t kTiny = 16 * 16 * 16;
// From this many, OpenBLAS (measured: equal to Eigen at 32^3, 1.7x faster from 128^3).
constexpr int64_t kBlas = 48 * 48 * 48;

template <class T, class OA, class OB>
void eigen_product(const OA& A, const OB& B, Map<T>& Y, bool tiny, T alpha, T beta) {
  if (beta == T(0)) {
    if (tiny) Y.noalias() = A.lazyProduct(B);
    else Y.noalias() = A * B;
    if (alpha != T(1)) Y *= alpha;
  } else {
    if (beta != T(1)) Y *= beta;
    if (tiny) Y.noalias() += alpha * A.lazyProduct(B);
    else Y.noalias() += alpha * A * B;
  }
}

}  // namespace

template <class T>
void gemm(const T* a, int64_t ra, int64_t ca, int64_t lda, bool ta, const T* b, int64_t rb,
          int64_t cb, int64_t ldb, bool tb, T* y, int64_t ldy, T alpha, T beta) {
  const int64_t M = ta ? ca : ra, N = tb ? rb : cb, K = ta ? ra : ca;
  if (M == 0 || N == 0) return;
  const int64_t work = M * N * K;
#ifdef TAPEGRAD_HAVE_BLAS
  if (work >= kBlas) {
    // Threads: ours inside our parallel regions already share the work, so one there; all of
    // them (OpenMP's count) outside. Set per call, so concurrent callers never interfere.
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(omp_in_parallel() ? 1 : omp_get_max_threads(), &rntm);
    const trans_t opa = ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    const trans_t opb = tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    T al = alpha, be = beta;
    if constexpr (sizeof(T) == 4)
      bli_sgemm_ex(opa, opb, M, N, K, &al, const_cast<T*>(a), lda, 1, const_cast<T*>(b), ldb, 1,
                   &be, y, ldy, 1, nullptr, &rntm);
    else
      bli_dgemm_ex(opa, opb, M, N, K, &al, const_cast<T*>(a), lda, 1, const_cast<T*>(b), ldb, 1,
                   &be, y, ldy, 1, nullptr, &rntm);
    return;
  }
#endif
  CMap<T> A(a, ra, ca, Eigen::OuterStride<>(lda)), B(b, rb, cb, Eigen::OuterStride<>(ldb));
  Map<T> Y(y, M, N, Eigen::OuterStride<>(ldy));
  if (K == 0) {
    if (beta == T(0)) Y.setZero();
    else Y *= beta;
    return;
  }
  const bool tiny = work <= kTiny;
  if (!ta && !tb) eigen_product<T>(A, B, Y, tiny, alpha, beta);
  else if (ta && !tb) eigen_product<T>(A.transpose(), B, Y, tiny, alpha, beta);
  else if (!ta && tb) eigen_product<T>(A, B.transpose(), Y, tiny, alpha, beta);
  else eigen_product<T>(A.transpose(), B.transpose(), Y, tiny, alpha, beta);
}

template void gemm<float>(const float*, int64_t, int64_t, int64_t, bool, const float*, int64_t,
                          int64_t, int64_t, bool, float*, int64_t, float, float);
template void gemm<double>(const double*, int64_t, int64_t, int64_t, bool, const double*,
                           int64_t, int64_t, int64_t, bool, double*, int64_t, double, double);

bool have_blas() {
#ifdef TAPEGRAD_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

}  // namespace tg::detail
