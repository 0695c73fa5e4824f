// Whole products by the panel kernel (ops/panel_kernel.h), for the sizes a model's layers make:
// a Linear over a batch of tokens (hundreds of rows, inner and outer sizes of tens to hundreds),
// forward (B transposed: x W^T), and backward (dX = dY W; dW = dY^T x, A transposed). With its
// skx kernels (the Zen 5's, an Intel Xeon's with AVX-512) BLIS 0.9 packs these through a generic
// scale-and-copy loop and a strided gather: 15% of the GPT step's time, its kernels themselves 42%
// (docs/PERFORMANCE.md, "The GPT step on the Zen 5"); on the Zen 4, where it runs its zen3 AVX2
// kernels, this kernel beat those too ("The Zen 4 again"). Here nothing is packed: op(B) is read in
// place when it is untransposed and transposed once into a buffer otherwise (by the packets'
// in-register transpose), op(A) read in place either way (PanelKernel's strided rows).
//
// Every entry of Y is summed over k in order, one rounding a step where the CPU has FMA, whatever
// the blocking and the thread count; the columns past the last whole panel go to gemm in one call.

#include <tapegrad/ops/panel_kernel.h>

#include <omp.h>

#include <algorithm>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // as in panel_kernel.h
// transpose_into's rows [j0, j1) of b (j1 - j0 a multiple of the packets' width W): blocks of W x W
// by the packets' in-register transpose, the columns past the last whole block one at a time.
template <class T>
void transpose_rows_of(const T* b, int64_t ldb, int64_t j0, int64_t j1, int64_t k, T* bt,
                       int64_t ldt) {
  using namespace Eigen::internal;
  using P = typename PanelKernel<T>::P;
  constexpr int W = PanelKernel<T>::kWidth;
  const int64_t k_whole = k / W * W;
  for (int64_t j = j0; j < j1; j += W) {
    for (int64_t q = 0; q < k_whole; q += W) {
      PacketBlock<P, W> block;
      for (int r = 0; r < W; ++r) block.packet[r] = ploadu<P>(b + (j + r) * ldb + q);
      ptranspose(block);
      for (int r = 0; r < W; ++r) pstoreu(bt + (q + r) * ldt + j, block.packet[r]);
    }
    for (int64_t q = k_whole; q < k; ++q)
      for (int r = 0; r < W; ++r) bt[q * ldt + j + r] = b[(j + r) * ldb + q];
  }
}
#pragma GCC diagnostic pop

// Rows of A and Y a block and entries of the inner size a pass: a block of A (96 x 256) stays in
// the L2 cache while every panel passes it, and each panel's part (256 x kPanel) in L1.
constexpr int64_t kBlockRows = 96;
constexpr int64_t kInner = 256;

}  // namespace

template <class T>
void transpose_into(const T* b, int64_t ldb, int64_t n, int64_t k, T* bt, int64_t ldt, int team) {
  constexpr int W = PanelKernel<T>::kWidth;
  const int64_t n_whole = n / W * W;
  if (team > 1) {
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t j = 0; j < n_whole; j += W) transpose_rows_of(b, ldb, j, j + W, k, bt, ldt);
  } else {
    transpose_rows_of(b, ldb, 0, n_whole, k, bt, ldt);
  }
  for (int64_t q = 0; q < k; ++q)
    for (int64_t j = n_whole; j < n; ++j) bt[q * ldt + j] = b[j * ldb + q];
}

template void transpose_into<float>(const float*, int64_t, int64_t, int64_t, float*, int64_t,
                                    int);
template void transpose_into<double>(const double*, int64_t, int64_t, int64_t, double*, int64_t,
                                     int);

template <class T>
void panel_gemm(const MatrixView<const T>& a, const MatrixView<const T>& b, const MatrixView<T>& y,
                bool accumulate, const T* bias) {
  if (accumulate) bias = nullptr;  // Y holds its start already
  using Kernel = PanelKernel<T>;
  const int64_t M = a.op_rows(), N = b.op_cols(), K = a.op_cols();
  const int64_t whole = N / Kernel::kPanel * Kernel::kPanel;
  // op(B)'s whole panels, row-major: b itself, or b^T in a buffer whose rows are not a multiple
  // of 4 KiB long (rows that far apart share the L1 cache's sets).
  const T* op_b = b.data;
  int64_t ldb = b.ld;
  // Threads share the rows (below), and B's transposition before them.
  const int team = (omp_in_parallel() || M * whole * K < (int64_t{1} << 21)) ? 1 : team_size();
  Tensor bt;  // op(B)'s whole panels when B is transposed
  if (b.transposed && whole > 0 && K > 0) {
    ldb = whole * int64_t(sizeof(T)) % 4096 == 0 ? whole + Kernel::kWidth : whole;
    bt = Tensor(Shape{K * ldb}, dtype_of<T>());
    T* bt_data = bt.data<T>();
    transpose_into(b.data, b.ld, whole, K, bt_data, ldb, team);
    op_b = bt_data;
  }
  // A's entry (i, q): a[i * ars + q * acs].
  const int64_t ars = a.transposed ? 1 : a.ld, acs = a.transposed ? a.ld : 1;
  T* y_data = y.data;
  const int64_t ldy = y.ld;
  const auto block = [&](int64_t i0, int64_t m) {
    for (int64_t q = 0; q < K; q += kInner) {
      const int64_t k = std::min(kInner, K - q);
      for (int64_t j = 0; j < whole; j += Kernel::kPanel)
        Kernel::rows(a.data + i0 * ars + q * acs, ars, acs, m, k, op_b + q * ldb + j, ldb,
                     y_data + i0 * ldy + j, ldy, accumulate || q > 0,
                     bias && q == 0 ? bias + j : nullptr);
    }
  };
  if (whole > 0 && K == 0 && !accumulate) {  // an empty sum: the bias, or zeros
    fill_rows(y, 0, whole, bias);
  } else if (whole > 0) {
    if (team == 1) {
      for (int64_t i = 0; i < M; i += kBlockRows) block(i, std::min(kBlockRows, M - i));
    } else {
      // Each thread its share of the row tiles (8 rows), within one tile of the others', in
      // blocks of up to kBlockRows rows. (Blocks of 96 for all dealt two threads 288 and 224
      // of 512 rows, the GPT's c_fc dW, and 48 and 17 of 65, its lm_head dW.)
      const int64_t tiles = (M + 7) / 8;
#pragma omp parallel num_threads(team)
      {
        const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
        const int64_t r0 = std::min(M, tiles * t / threads * 8);
        const int64_t r1 = std::min(M, tiles * (t + 1) / threads * 8);
        for (int64_t i = r0; i < r1; i += kBlockRows) block(i, std::min(kBlockRows, r1 - i));
      }
    }
  }
  if (whole < N) {
    const MatrixView<const T> rest =
        b.transposed ? MatrixView<const T>(b.data + whole * b.ld, N - whole, K, b.ld, true)
                     : MatrixView<const T>(b.data + whole, K, N - whole, b.ld);
    if (bias) fill_rows(y, whole, N, bias);
    gemm<T>(a, rest, view(y_data + whole, M, N - whole, ldy), T(1),
            accumulate || bias ? T(1) : T(0));
  }
}

template void panel_gemm<float>(const MatrixView<const float>&, const MatrixView<const float>&,
                                const MatrixView<float>&, bool, const float*);
template void panel_gemm<double>(const MatrixView<const double>&, const MatrixView<const double>&,
                                 const MatrixView<double>&, bool, const double*);

}  // namespace tg::detail
