#pragma once
// The one matrix-multiply kernel every op uses (internal, not installed):
//   Y = alpha op(A) op(B) + beta Y,  row-major, op = transpose or nothing.
// Large products go to BLIS when the build has it (TAPEGRAD_BLAS): it is 1.4-1.7x faster than
// Eigen's GEMM on our machines, re-entrant (threads may multiply at once), and told per call how
// many threads to use: one inside our parallel regions, detail::team_size() outside them (the
// cores other processes leave free, ops/threads.h). Medium ones
// stay in Eigen, and tiny ones are plain loops with no setup cost at all. With AVX-512, the
// sizes a model's layers make go to panel_gemm (below).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace tg::detail {

/// A row-major matrix in a buffer: rows x cols, row stride ld; read as its transpose
/// (cols x rows) when `transposed`.
template <class T>
struct MatrixView {
  T* data;
  int64_t rows, cols, ld;
  bool transposed = false;

  MatrixView(T* data_, int64_t rows_, int64_t cols_, int64_t ld_, bool transposed_ = false)
      : data(data_), rows(rows_), cols(cols_), ld(ld_), transposed(transposed_) {}
  /// A writable view read only.
  template <class U>
    requires std::is_same_v<const U, T>
  MatrixView(const MatrixView<U>& m)
      : data(m.data), rows(m.rows), cols(m.cols), ld(m.ld), transposed(m.transposed) {}

  /// The same matrix read transposed (when `on`).
  MatrixView t(bool on = true) const { return {data, rows, cols, ld, transposed != on}; }
  /// The rows and columns of op(this).
  int64_t op_rows() const { return transposed ? cols : rows; }
  int64_t op_cols() const { return transposed ? rows : cols; }
};

/// rows x cols at data with row stride ld (cols when left out).
template <class T>
MatrixView<T> view(T* data, int64_t rows, int64_t cols, int64_t ld) {
  return {data, rows, cols, ld};
}
template <class T>
MatrixView<T> view(T* data, int64_t rows, int64_t cols) {
  return {data, rows, cols, cols};
}

/// Y = alpha op(A) op(B) + beta Y, Y (M, N) untransposed, with M = op(A)'s rows, N = op(B)'s
/// columns and op(A)'s columns = op(B)'s rows. The caller checks the shapes. Throws nothing but
/// tg::MemoryError (a std::bad_alloc), when the packing buffers of a product Eigen takes cannot
/// be had.
/// (The views come by reference: a 40-byte view passed by value goes through memory, and a
/// callee that copies it with wider loads than the caller's stores waits on each of them.)
template <class T>
void gemm(const MatrixView<const T>& A, const MatrixView<const T>& B, const MatrixView<T>& Y,
          T alpha = T(1), T beta = T(0));

/// Y = op(A) op(B) + 1 bias^T: every row of Y the product's plus `bias` (N entries), as a
/// Linear's forward. Where gemm would take the product by panel_gemm, the bias is where its
/// sums start; elsewhere Y is filled with the bias and the product accumulated into it.
template <class T>
void gemm_bias(const MatrixView<const T>& A, const MatrixView<const T>& B, const MatrixView<T>& Y,
               const T* bias);

/// Y = op(A) op(B), or Y += it when `accumulate`, or Y = 1 bias^T + it when given a bias (N
/// entries) and not accumulating, by PanelKernel (ops/panel_kernel.h): op(B)'s
/// whole panels of columns read in place (transposed into a buffer once first when B is
/// transposed), op(A) in place either way; the threads of a team_size() team share Y's row
/// blocks outside a parallel region. The columns past the last whole panel go to gemm. With
/// K = 0, Y = 0 or the bias (or Y unchanged when accumulating). (ops/panel_gemm.cpp; gemm sends
/// it the products it wins, see gemm.cpp.)
template <class T>
void panel_gemm(const MatrixView<const T>& A, const MatrixView<const T>& B, const MatrixView<T>& Y,
                bool accumulate, const T* bias = nullptr);

/// Every row of Y's columns [j0, j1) set to bias[j0, j1), or to zeros without a bias: the start
/// of a product's sums that does not begin in its kernel.
template <class T>
inline void fill_rows(const MatrixView<T>& Y, int64_t j0, int64_t j1, const T* bias) {
  for (int64_t i = 0; i < Y.rows; ++i) {
    T* row = Y.data + i * Y.ld;
    if (bias)
      std::copy(bias + j0, bias + j1, row + j0);
    else
      std::fill(row + j0, row + j1, T(0));
  }
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

/// The name of the kernels BLIS runs on this CPU ("skx", "zen3", ...; "generic" is its portable
/// C), or "" without BLIS. Starts BLIS if it has not started.
std::string blas_kernels();

/// BLIS's version ("0.9.0"), or "" without BLIS.
std::string blas_version();

}  // namespace tg::detail
