#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/panel_kernel.h>
#include <tapegrad/ops/threads.h>

#include <tapegrad/autograd/tensor.h>

#include <Eigen/Core>
#include <algorithm>
#include <climits>

#ifdef TAPEGRAD_HAVE_BLAS
#include <blis.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#endif

namespace tg::detail {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using Map = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

// Up to this many multiply-adds plain loops win: no packing, no setup.
constexpr int64_t kTiny = 16 * 16 * 16;
// From this many, BLIS (measured here: 1.3x faster than Eigen at 64^3, 1.5-1.7x from 256^3).
constexpr int64_t kBlas = 48 * 48 * 48;

template <class T, class OA, class OB>
void eigen_product(const OA& A, const OB& B, Map<T>& Y, T alpha, T beta) {
  if (beta == T(0)) {
    Y.noalias() = A * B;
    if (alpha != T(1)) Y *= alpha;
  } else {
    if (beta != T(1)) Y *= beta;
    Y.noalias() += alpha * A * B;
  }
}

#ifdef TAPEGRAD_HAVE_BLAS
// BLIS chooses its kernels for the CPU once, when it starts. Debian 12's BLIS (0.9) knows the
// CPUs of its time: Intel's by their features, AMD's families 0x15, 0x17 and 0x19. On a later
// one it falls back to its generic C kernels: on AMD's Zen 5 (family 0x1A) an sgemm of 1024^3
// on one thread ran at 23 GFLOP/s with them, 186 with its AVX-512 (skx) kernels and 95 with its
// AVX2 ones (zen3). So before BLIS starts, a CPU it does not know gets the kernels its features
// allow: skx with AVX-512 F, DQ, BW and VL, haswell with AVX2 and FMA.
// An Intel CPU with AVX-512 gets skx too. BLIS 0.9 runs skx there only on models it knows to have
// two 512-bit FMA units (a table of its time), and its AVX2 kernels on every other: on an Intel
// Xeon of model 167 (AMX, AVX-512 FP16: later than the table) that halved the rate, 96 GFLOP/s at
// one thread against 149 with skx (1024^3, float), and the GPT step took 65.5 ms against 48.
// (Where a CPU has one 512-bit FMA unit, the two kernels' peaks are the same in flops a cycle, and
// the AVX-512 clock may be lower: not measured, no such CPU here. A BLIS built without its skx
// kernels would not start with them; Debian's x86-64 BLIS has them.)
// A BLIS of 1.0 or later, or a BLIS_ARCH_TYPE the user set, is left to choose. (BLIS reads
// BLIS_ARCH_TYPE only while it starts, and 0.9 exports no other way to name the kernels; the
// variable is removed again afterwards, so that programs this one starts choose for themselves.)
int blis_arch_to_set() {
#if defined(__x86_64__)
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr) return -1;
  if (std::strncmp(bli_info_get_version_str(), "0.", 2) != 0) return -1;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return -1;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4), std::memcpy(vendor + 4, &edx, 4), std::memcpy(vendor + 8, &ecx, 4);
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return -1;
  unsigned family = (eax >> 8) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  const bool intel = std::strcmp(vendor, "GenuineIntel") == 0;
  if (intel) return avx512 ? BLIS_ARCH_SKX : -1;
  const bool known_amd = std::strcmp(vendor, "AuthenticAMD") == 0 &&
                         (family == 0x15 || family == 0x17 || family == 0x19);
  if (known_amd) return -1;
  if (avx512) return BLIS_ARCH_SKX;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return BLIS_ARCH_HASWELL;
#endif
  return -1;
}

// Starts BLIS, with the kernels above where it would otherwise run slower ones.
bool start_blis() {
  const int arch = blis_arch_to_set();
  if (arch >= 0) setenv("BLIS_ARCH_TYPE", std::to_string(arch).c_str(), 1);
  bli_init();
  if (arch >= 0) unsetenv("BLIS_ARCH_TYPE");
  return true;
}

void ensure_blis_started() {
  [[maybe_unused]] static const bool started = start_blis();
}

// Whether the kernels BLIS runs have small-matrix ("sup") ones of their own.
bool blis_has_sup() {
  static const bool has = [] {
    const std::string k = blas_kernels();
    return k == "haswell" || k.starts_with("zen");
  }();
  return has;
}
#endif

// Eigen's blocked product with its packing buffers taken from the thread's buffer cache (one
// tensor, reused from call to call) rather than from the heap at each call, as Eigen's own
// product does for buffers over its stack limit (128 KiB): under AddressSanitizer those freed
// buffers sit in its quarantine, and the fused attention's products (64 rows by thousands of
// keys) grew a run's peak RSS from 135 to 217 MiB that way. Eigen's internal interface (3.4):
// the blocking's sizes from computeProductBlockingSizes, the buffers set on a level3_blocking.
template <class T>
class CachedBlocking : public Eigen::internal::level3_blocking<T, T> {
 public:
  // For the product of a row-major result: Eigen runs it transposed, so its rows are N.
  CachedBlocking(Eigen::Index M, Eigen::Index N, Eigen::Index K) {
    Eigen::Index kc = K, mc = N, nc = M;
    Eigen::internal::computeProductBlockingSizes<T, T, 1>(kc, mc, nc, Eigen::Index(1));
    constexpr Eigen::Index align = 64 / sizeof(T);
    const Eigen::Index a = (kc * mc + align - 1) / align * align;
    space_ = Tensor(Shape{a + kc * nc}, dtype_of<T>());
    this->m_kc = kc, this->m_mc = mc, this->m_nc = nc;
    this->m_blockA = space_.data<T>();
    this->m_blockB = this->m_blockA + a;
  }

 private:
  Tensor space_;
};

// Y (+)= alpha op(A) op(B) by Eigen's blocked product, its buffers cached (above).
template <class T, int OrderA, int OrderB>
void cached_eigen_product(const MatrixView<const T>& a, const MatrixView<const T>& b,
                          const MatrixView<T>& y, T alpha) {
  const Eigen::Index M = a.op_rows(), N = b.op_cols(), K = a.op_cols();
  CachedBlocking<T> blocking(M, N, K);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, OrderA, false, T, OrderB, false,
                                                 Eigen::RowMajor, 1>::run(M, N, K, a.data, a.ld,
                                                                         b.data, b.ld, y.data, 1,
                                                                         y.ld, alpha, blocking);
}

// Y = alpha A' B + beta Y for tiny products, one row of Y at a time: a sum of scaled rows of B,
// so the inner loop runs along B's rows and vectorises. NC > 0 fixes the row length and KC > 0
// the inner dimension at compile time (fully unrolled, B's rows then stay in registers); 0 is
// any size. Every entry is summed over k in order, whatever the variant.
template <class T, int NC, int KC>
void tiny_rows(const T* __restrict a, int64_t ai, int64_t ak, const T* __restrict b, int64_t ldb,
               T* __restrict y, int64_t ldy, int64_t M, int64_t n, int64_t k_any, T alpha,
               T beta) {
  const int64_t N = NC > 0 ? NC : n;
  const int64_t K = KC > 0 ? KC : k_any;
  for (int64_t i = 0; i < M; ++i) {
    T* __restrict yi = y + i * ldy;
    if (beta == T(0))
      for (int64_t j = 0; j < N; ++j) yi[j] = T(0);
    else if (beta != T(1))
      for (int64_t j = 0; j < N; ++j) yi[j] *= beta;
#pragma GCC unroll 16
    for (int64_t k = 0; k < K; ++k) {
      const T aik = alpha * a[i * ai + k * ak];
      const T* __restrict bk = b + k * ldb;
      for (int64_t j = 0; j < N; ++j) yi[j] = madd(aik, bk[j], yi[j]);
    }
  }
}

template <class T, int NC>
void tiny_rows_k(const T* a, int64_t ai, int64_t ak, const T* b, int64_t ldb, T* y, int64_t ldy,
                 int64_t M, int64_t N, int64_t K, T alpha, T beta) {
  switch (K) {
    case 4: return tiny_rows<T, NC, 4>(a, ai, ak, b, ldb, y, ldy, M, N, K, alpha, beta);
    case 8: return tiny_rows<T, NC, 8>(a, ai, ak, b, ldb, y, ldy, M, N, K, alpha, beta);
    default: return tiny_rows<T, NC, 0>(a, ai, ak, b, ldb, y, ldy, M, N, K, alpha, beta);
  }
}

// Tiny products (M N K <= kTiny) with B untransposed (read as (K, N)), where any setup costs
// more than the arithmetic; common sizes get their own unrolled loop.
template <class T>
void tiny_product(const MatrixView<const T>& a, const MatrixView<const T>& b,
                  const MatrixView<T>& y, T alpha, T beta) {
  const int64_t M = a.op_rows(), N = b.op_cols(), K = a.op_cols();
  const int64_t ai = a.transposed ? 1 : a.ld, ak = a.transposed ? a.ld : 1;  // A' = a[i ai + k ak]
  const T* p = a.data;
  switch (N) {
    case 1: return tiny_rows_k<T, 1>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
    case 2: return tiny_rows_k<T, 2>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
    case 4: return tiny_rows_k<T, 4>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
    case 8: return tiny_rows_k<T, 8>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
    case 16: return tiny_rows_k<T, 16>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
    default: return tiny_rows<T, 0, 0>(p, ai, ak, b.data, b.ld, y.data, y.ld, M, N, K, alpha, beta);
  }
}

// The same with B transposed (b is (N, K)): copied the right way round first, into a buffer of
// kTiny entries (K N <= kTiny since M >= 1) that only this path puts on the stack.
template <class T>
[[gnu::noinline]] void tiny_product_bt(const MatrixView<const T>& a, const MatrixView<const T>& b,
                                       const MatrixView<T>& y, T alpha, T beta) {
  const int64_t N = b.rows, K = b.cols;
  T bt[kTiny];
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) bt[k * N + j] = b.data[j * b.ld + k];
  tiny_product<T>(a, view(bt, K, N), y, alpha, beta);
}

// Whether panel_gemm (ops/panel_gemm.cpp) takes the product: with AVX-512, whatever BLIS's kernels
// (and, in a build without BLIS, instead of Eigen: not measured), for a Y of at most 512 columns in
// float (128 in double, and then at most 768 rows by an inner size of 512). Measured on the Zen 5
// (one thread, GFLOP/s, panel_gemm against the route before it: BLIS, or Eigen below kBlas or where
// BLIS's sup would run): the GPT step's Linears in float, 768 rows by 128 to 512 (x W^T, dY W, dY^T
// x), 1.00x-1.66x, 186-218 against 116-210; the attention's per-head products (64 x 32 x 64)
// 1.7x-2.3x; the MNIST Net's fc1 forward (64 x 9216 x 128, W transposed) 164 against 69. Wider Ys
// lose: each block of rows then passes every panel of B from beyond the L2 cache (768 columns
// 0.73x-1.03x, 1024^3 0.83x, 50304 0.23x). In double the kernel's panels are 16 wide and the gains
// smaller (1.04x-1.35x at 768 x 128 x 128-like sizes, 0.67x-0.96x past the bounds above). Nor, in
// float, the products BLIS's packed path wins on an Intel Xeon of model 167 (the bounds are that
// CPU's; panel_gemm against BLIS skx, one thread, x 256 columns): A transposed from 1024 rows with
// an inner size from 256, where the kernel reads op(A) in place down A's columns (1024 x 768 94
// against 127 GFLOP/s; 1024 x 2048, an LSTM's dW, 76 against 109), and an inner size past 1024 from
// 512 rows (A as it is, 512 x 2048 124 against 135, 1024 x 2048 123 against 137). At 512 rows with
// A transposed and inner sizes of 256 and 768, BLIS led by 6-15% at 256 columns, but the GPT's dW
// at 128 columns was even here and the kernel's on the Zen 5 (above): they stay. Whatever kernels
// BLIS runs: on the Zen 4 (AVX-512 on 256-bit units), where BLIS 0.9 runs its zen3 AVX2 kernels
// with their small-matrix ("sup") path, the kernel led at every shape above too (float, one thread:
// the GPT's Linears 1.03x-1.46x, 105-113 against 77-106 GFLOP/s, over BLIS's 102-104 at 1024^3; the
// attention's per-head products 1.16x-1.65x; no shape below 0.99x), except a few rows by a
// transposed B: the kernel transposes B into a buffer first, which 16 rows or fewer do not repay,
// and the sup kernels read it as it is (8 x 384 x 128 0.82x, 8 x 128 x 512 0.79x, 16 x 512 x 128
// 0.89x; 16 x 384 x 128 1.06x): those stay with BLIS where it has them.
template <class T>
bool panel_route(const MatrixView<const T>& a, const MatrixView<const T>& b, int64_t M, int64_t N,
                 int64_t K, T alpha, T beta) {
  if constexpr (PanelKernel<T>::kRows < 8) {
    return false;
  } else {
    // alpha 1 with beta 0 or 1, or any alpha with beta 0 (gemm scales Y after the product).
    if (beta != T(0) && (alpha != T(1) || beta != T(1))) return false;
    if (M * N * K <= kTiny || M < 8 || N < PanelKernel<T>::kPanel) return false;
    if (sizeof(T) == 4 ? N > 512 : (N > 128 || M > 768 || K > 512)) return false;
    if ((a.transposed && M >= 1024 && K >= 256) || (M >= 512 && K > 1024)) return false;
    // B's rows read in place must not be a multiple of 4 KiB apart (they would share L1's sets).
    if (!b.transposed && b.ld * int64_t(sizeof(T)) % 4096 == 0) return false;
#ifdef TAPEGRAD_HAVE_BLAS
    if (M <= 16 && b.transposed) {
      ensure_blis_started();
      if (blis_has_sup()) return false;
    }
#endif
    return true;
  }
}

}  // namespace

template <class T>
void gemm(const MatrixView<const T>& a, const MatrixView<const T>& b, const MatrixView<T>& y,
          T alpha, T beta) {
  const int64_t M = a.op_rows(), N = b.op_cols(), K = a.op_cols();
  if (M == 0 || N == 0) return;
  if (panel_route(a, b, M, N, K, alpha, beta)) {
    panel_gemm(a, b, y, beta == T(1));
    // Each entry the sum times alpha, as BLIS's kernels compute it (the attention's scores,
    // Q K^T scale, in blocks of 64 rows: 64 x 64 to 512 x 32 or 64 1.08x-1.37x BLIS's
    // small-matrix kernels on the Zen 4, one thread, this pass over Y included).
    if (alpha != T(1))
      Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0,
                 Eigen::OuterStride<>>(y.data, M, N, Eigen::OuterStride<>(y.ld)) *= alpha;
    return;
  }
  const int64_t work = M * N * K;
#ifdef TAPEGRAD_HAVE_BLAS
  if (work >= kBlas) {
    ensure_blis_started();
    // Threads: ours inside our parallel regions already share the work, so one there; the
    // team the free cores allow (ops/threads.h) outside. Set per call, so concurrent callers
    // never interfere.
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(omp_in_parallel() ? 1 : team_size(), &rntm);
    // BLIS's path for small and skinny products ("sup") is faster on our machines for small
    // ones (float, one thread, best of six: 64x256x64 73 GFLOP/s with it, 60 without) but slower
    // with a transposed B (34 vs 46), a long side (64x1024x64: 26 vs 56) or a transposed A and
    // a large Y (256^3: 58 vs 78); it is turned off for those. Except for a few rows (M <= 16:
    // one token's step through a Linear, a small batch through an RNN), where it wins whatever
    // the layout (x W^T, float, one thread: 1x3072x768 25.5 against 6.4 GFLOP/s, 8x3072x768
    // 66.5 against 35.3, 16x384x768 64.7 against 55.4; two threads 45.9 against 11.7 at 1 row).
    // And except for a narrow Y (N <= 32) with B untransposed, where it wins at every size we
    // tried, M up to 43264, K 9 to 1024, A either way (1024x32x256: 92.0 against 71.7; 4096x16x256
    // 94.0 against 60.8; two threads 192.5 against 142.9 at 4096x32x256).
    // And except for a short product: at most 64 rows, with an inner size of at most 64 (or, B
    // transposed, at most 64 columns), as conv2d's im2col products are (and Winograd's were,
    // before they moved to ops/panel_kernel.h where its kernels have no sup path). There it won
    // at every shape we tried, one thread and two (64x1008x32: 79.7 against 63.7; 32x1008x64, A
    // transposed: 82.0 against 59.6; 32x9x676, B transposed: 56.8 against 13.5), unless a row of
    // an operand is a multiple of 4 KiB long (64x1024x32: 39.3 against 57.5): such rows share
    // the cache's sets. (The long-side losses above were measured at such sizes.)
    const bool ta = a.transposed, tb = b.transposed;
    const auto aliased = [](int64_t ld) { return ld * int64_t(sizeof(T)) % 4096 == 0; };
    const bool narrow = N <= 32 && !tb;
    const bool short_product = M <= 64 && (tb ? N <= 64 : K <= 64) && !aliased(a.ld) &&
                               !aliased(b.ld) && !aliased(y.ld);
    const bool sup = M <= 16 || narrow || short_product ||
                     !(tb || std::max(M, N) >= 512 || (ta && M * N >= 256 * 256));
    if (!sup) bli_rntm_disable_l3_sup(&rntm);
    // BLIS 0.9 has sup kernels for haswell and the zen family only; elsewhere (skx) its sup path
    // runs reference C. There Eigen (one thread) takes the products sup would, up to 256^3
    // (float, one thread, Zen 5, skx against Eigen built for AVX-512: 1x3072x768, B transposed,
    // 2.4 against 35.7 GFLOP/s; 16x3072x768 46 against 75; 32x9x676 16 against 48; 64x256x64
    // 119 against 150; from 256^3 BLIS leads, 185 against 159).
    if (!sup || blis_has_sup() || (M > 16 && work >= 256 * 256 * 256)) {
      const trans_t opa = ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
      const trans_t opb = tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
      T al = alpha, be = beta;
      T* pa = const_cast<T*>(a.data);
      T* pb = const_cast<T*>(b.data);
      if constexpr (sizeof(T) == 4)
        bli_sgemm_ex(opa, opb, M, N, K, &al, pa, a.ld, 1, pb, b.ld, 1, &be, y.data, y.ld, 1,
                     nullptr, &rntm);
      else
        bli_dgemm_ex(opa, opb, M, N, K, &al, pa, a.ld, 1, pb, b.ld, 1, &be, y.data, y.ld, 1,
                     nullptr, &rntm);
      return;
    }
  }
#endif
  if (work <= kTiny) {  // K = 0 too: Y = beta Y
    if (b.transposed && K > 0)
      tiny_product_bt(a, b, y, alpha, beta);
    else
      tiny_product(a, b, y, alpha, beta);
    return;
  }
  CMap<T> A(a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld));
  CMap<T> B(b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
  Map<T> Y(y.data, M, N, Eigen::OuterStride<>(y.ld));
  // A large product here (with BLIS, one its kernels have no sup path for): Eigen's blocked
  // product, its buffers cached. One row or column stays Eigen's matrix-vector product.
  if (work >= kBlas && M > 1 && N > 1) {
    if (beta == T(0)) Y.setZero();
    else if (beta != T(1)) Y *= beta;
    constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
    if (!a.transposed && !b.transposed) cached_eigen_product<T, R, R>(a, b, y, alpha);
    else if (a.transposed && !b.transposed) cached_eigen_product<T, C, R>(a, b, y, alpha);
    else if (!a.transposed && b.transposed) cached_eigen_product<T, R, C>(a, b, y, alpha);
    else cached_eigen_product<T, C, C>(a, b, y, alpha);
    return;
  }
  if (!a.transposed && !b.transposed) eigen_product<T>(A, B, Y, alpha, beta);
  else if (a.transposed && !b.transposed) eigen_product<T>(A.transpose(), B, Y, alpha, beta);
  else if (!a.transposed && b.transposed) eigen_product<T>(A, B.transpose(), Y, alpha, beta);
  else eigen_product<T>(A.transpose(), B.transpose(), Y, alpha, beta);
}

template <class T>
void gemm_bias(const MatrixView<const T>& a, const MatrixView<const T>& b, const MatrixView<T>& y,
               const T* bias) {
  const int64_t M = a.op_rows(), N = b.op_cols(), K = a.op_cols();
  if (M == 0 || N == 0) return;
  if (panel_route(a, b, M, N, K, T(1), T(0))) {
    panel_gemm(a, b, y, false, bias);
    return;
  }
  fill_rows(y, 0, N, bias);
  gemm(a, b, y, T(1), T(1));
}

template void gemm_bias<float>(const MatrixView<const float>&, const MatrixView<const float>&,
                               const MatrixView<float>&, const float*);
template void gemm_bias<double>(const MatrixView<const double>&, const MatrixView<const double>&,
                                const MatrixView<double>&, const double*);

template void gemm<float>(const MatrixView<const float>&, const MatrixView<const float>&,
                          const MatrixView<float>&, float, float);
template void gemm<double>(const MatrixView<const double>&, const MatrixView<const double>&,
                           const MatrixView<double>&, double, double);

bool have_blas() {
#ifdef TAPEGRAD_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

std::string blas_kernels() {
#ifdef TAPEGRAD_HAVE_BLAS
  ensure_blis_started();
  return bli_arch_string(bli_arch_query_id());
#else
  return "";
#endif
}

std::string blas_version() {
#ifdef TAPEGRAD_HAVE_BLAS
  return bli_info_get_version_str();
#else
  return "";
#endif
}

}  // namespace tg::detail
