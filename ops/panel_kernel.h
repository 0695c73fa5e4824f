#pragma once
// A register-tiled product kernel of our own for products with a short inner size (internal to
// ops/, not installed): Y = A B for an A read in place (rows by k, row-major or, by a column
// stride, transposed) and a B read in panels of kPanel columns (two SIMD packets), each panel's
// k rows ldp apart. kRows rows of Y by one panel are
// summed in registers, the k products in order (one rounding each where the CPU has FMA), and
// stored once: no packing of A, none of B when its rows are already contiguous, and no pass to
// zero Y first (which Eigen's product needs). A panel of short inner size stays in the L1 cache
// for all of A's rows (a long one, as in Winograd's dU, streams from L2 once a tile of rows).
// Used by the LSTM's and GRU's steps (ops/recurrence.h: op(W) packed once per sequence), by
// conv2d's Winograd products (ops/winograd.cpp: the transformed input's rows read in place) and
// by panel_gemm (ops/panel_gemm.cpp: whole products of the sizes a model's layers make).

#include <cstdint>

#include <Eigen/Core>

#include <tapegrad/ops/gemm.h>

namespace tg::detail {

#pragma GCC diagnostic push
// (packet_traits<T>::type is an attributed vector type: GCC warns that a template argument drops
// the attribute, harmlessly, as Eigen's own headers do.)
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
struct PanelKernel {
  using P = typename Eigen::internal::packet_traits<T>::type;
  static constexpr int kWidth = Eigen::internal::unpacket_traits<P>::size;
  static constexpr int kPacketsPerPanel = 2;
  static constexpr int64_t kPanel = kPacketsPerPanel * kWidth;
  // 16 accumulators with 32 vector registers (AVX-512), 8 with 16 (AVX2 and below)
  static constexpr int kRows = sizeof(P) >= 64 ? 8 : 4;
  // Too narrow a SIMD packet (none at all, or SSE's doubles) for the kernel to pay: use gemm.
  static constexpr bool kUseful = kWidth >= 4;

  /// Y (m, kPanel; row stride ldy) = A (m, k; row stride lda) times one panel (k rows of kPanel,
  /// ldp apart), or Y += it when `accumulate`.
  static void rows(const T* A, int64_t lda, int64_t m, int64_t k, const T* panel, int64_t ldp,
                   T* Y, int64_t ldy, bool accumulate) {
    rows_of<true>(A, lda, 1, m, k, panel, ldp, Y, ldy, accumulate);
  }
  /// The same with A's entry (i, q) at A[i * ars + q * acs]: A read transposed in place when
  /// ars is 1 (each of its columns then gives the tile's rows their entries side by side). With a
  /// `bias` (kPanel entries) and not accumulating, every row of Y is bias + the product: the sums
  /// start from it (a Linear's bias at no extra pass).
  static void rows(const T* A, int64_t ars, int64_t acs, int64_t m, int64_t k, const T* panel,
                   int64_t ldp, T* Y, int64_t ldy, bool accumulate, const T* bias = nullptr) {
    if (acs == 1)
      rows_of<true>(A, ars, 1, m, k, panel, ldp, Y, ldy, accumulate, bias);
    else
      rows_of<false>(A, ars, acs, m, k, panel, ldp, Y, ldy, accumulate, bias);
  }

  /// Y (m, n) = A (m, k; row stride lda) B (k, n; row stride ldb), Y's row stride ldy: every
  /// whole panel of B's columns by the kernel, the columns past them by gemm.
  static void product(const T* A, int64_t lda, int64_t m, int64_t k, const T* B, int64_t ldb,
                      int64_t n, T* Y, int64_t ldy) {
    const int64_t whole = kUseful ? n / kPanel * kPanel : 0;
    for (int64_t j = 0; j < whole; j += kPanel) rows(A, lda, m, k, B + j, ldb, Y + j, ldy, false);
    if (whole < n)
      gemm<T>(view(A, m, k, lda), view(B + whole, k, n - whole, ldb),
              view(Y + whole, m, n - whole, ldy));
  }

 private:
  // rows() with A's column step acs known to be 1 at compile time (kUnitStep) or not: the
  // contiguous case (the LSTM's, Winograd's) keeps its one-register address arithmetic.
  template <bool kUnitStep>
  static void rows_of(const T* A, int64_t ars, int64_t acs, int64_t m, int64_t k, const T* panel,
                      int64_t ldp, T* Y, int64_t ldy, bool accumulate, const T* bias = nullptr) {
    int64_t r = 0;
    for (; r + kRows <= m; r += kRows)
      tile<kRows, kUnitStep>(A + r * ars, ars, acs, k, panel, ldp, Y + r * ldy, ldy, accumulate,
                             bias);
    for (; r + 2 <= m; r += 2)
      tile<2, kUnitStep>(A + r * ars, ars, acs, k, panel, ldp, Y + r * ldy, ldy, accumulate, bias);
    if (r < m)
      tile<1, kUnitStep>(A + r * ars, ars, acs, k, panel, ldp, Y + r * ldy, ldy, accumulate, bias);
  }
  // Y's R rows (row stride ldy) by one panel (=, or += when accumulate, or = bias + when there
  // is a bias) A's R rows (entry (i, q) at A[i * ars + q * acs]) times the panel.
  template <int R, bool kUnitStep>
  static void tile(const T* A, int64_t ars, int64_t acs, int64_t k, const T* panel, int64_t ldp,
                   T* Y, int64_t ldy, bool accumulate, const T* bias);
};

template <class T>
template <int R, bool kUnitStep>
void PanelKernel<T>::tile(const T* A, int64_t ars, int64_t acs, int64_t k, const T* panel,
                          int64_t ldp, T* Y, int64_t ldy, bool accumulate, const T* bias) {
  using namespace Eigen::internal;
  constexpr int C = kPacketsPerPanel;
  P start[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) start[c] = bias ? ploadu<P>(bias + c * kWidth) : pset1<P>(T(0));
  P acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c)
      acc[r][c] = accumulate ? ploadu<P>(Y + r * ldy + c * kWidth) : start[c];
  for (int64_t q = 0; q < k; ++q, panel += ldp, A += kUnitStep ? 1 : acs) {
    P b[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) b[c] = ploadu<P>(panel + c * kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const P a = pset1<P>(A[r * ars]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = pmadd(a, b[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) pstoreu(Y + r * ldy + c * kWidth, acc[r][c]);
}
#pragma GCC diagnostic pop

/// bt (k, n; row stride ldt) = b^T for b (n, k; row stride ldb): blocks of kWidth x kWidth entries
/// by the packets' in-register transpose, the edges one entry at a time; the blocks of rows
/// shared by a team of `team` threads, or on the calling thread alone for 1 (no parallel region:
/// fit to be called inside one). ops/panel_gemm.cpp, float and double.
template <class T>
void transpose_into(const T* b, int64_t ldb, int64_t n, int64_t k, T* bt, int64_t ldt, int team);

}  // namespace tg::detail
