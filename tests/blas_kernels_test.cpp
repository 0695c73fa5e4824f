// Which kernels BLIS runs: never its generic C ones on a CPU whose features allow better (Debian
// 12's BLIS 0.9 does not know AMD's Zen 5 and fell back to them, 8x slower), its AVX-512 ones on
// an Intel CPU with AVX-512 (BLIS 0.9 ran its AVX2 ones on models later than it), the user's
// BLIS_ARCH_TYPE obeyed, and the environment left as it was. ctest runs each test in a process
// of its own, so each sees BLIS start.

#include <gtest/gtest.h>

#include <cpuid.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/ops.h>

namespace {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

TEST(BlasKernels, NeverGenericOnACpuWithAvx2AndFma) {
  if (!tg::detail::have_blas()) GTEST_SKIP() << "built without BLIS (TAPEGRAD_BLAS=OFF)";
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr) GTEST_SKIP() << "BLIS_ARCH_TYPE is set";
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const std::string kernels = tg::detail::blas_kernels();
  EXPECT_NE(kernels, "generic");
  EXPECT_NE(kernels, "");
  // BLIS_ARCH_TYPE, if tapegrad set it while BLIS started, is gone again
  EXPECT_EQ(std::getenv("BLIS_ARCH_TYPE"), nullptr);
}

bool intel_cpu_with_avx512() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4), std::memcpy(vendor + 4, &edx, 4), std::memcpy(vendor + 8, &ecx, 4);
  __builtin_cpu_init();
  return std::strcmp(vendor, "GenuineIntel") == 0 && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

TEST(BlasKernels, AnIntelCpuWithAvx512RunsTheAvx512Kernels) {
  if (!tg::detail::have_blas()) GTEST_SKIP() << "built without BLIS (TAPEGRAD_BLAS=OFF)";
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr) GTEST_SKIP() << "BLIS_ARCH_TYPE is set";
  if (!tg::detail::blas_version().starts_with("0."))
    GTEST_SKIP() << "BLIS " << tg::detail::blas_version() << " chooses its kernels itself";
  if (!intel_cpu_with_avx512()) GTEST_SKIP() << "not an Intel CPU with AVX-512 F, DQ, BW and VL";
  EXPECT_EQ(tg::detail::blas_kernels(), "skx");
  EXPECT_EQ(std::getenv("BLIS_ARCH_TYPE"), nullptr);
}

TEST(BlasKernels, TheUsersChoiceIsObeyedAndComputes) {
  if (!tg::detail::have_blas()) GTEST_SKIP() << "built without BLIS (TAPEGRAD_BLAS=OFF)";
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  // In a child that starts afresh (the "threadsafe" style runs the test binary again), so that
  // BLIS starts there with the variable set even when an earlier test of this process started
  // it: 3 is BLIS_ARCH_HASWELL.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("BLIS_ARCH_TYPE", "3", 1);
        if (tg::detail::blas_kernels() != "haswell") std::exit(2);
        if (std::getenv("BLIS_ARCH_TYPE") == nullptr) std::exit(3);  // the user's stays
        // a product large enough for BLIS, against one small enough for plain loops per row
        tg::Rng rng(0);
        const tg::Tensor a = tg::randn({96, 80}, rng, tg::Dtype::f64);
        const tg::Tensor b = tg::randn({80, 64}, rng, tg::Dtype::f64);
        const tg::Tensor y = tg::matmul(a, b);
        for (int64_t i = 0; i < 96; ++i) {
          const tg::Tensor row = tg::matmul(tg::narrow(a, 0, i, 1), b);  // 1 x 80 x 64: loops
          for (int64_t j = 0; j < 64; ++j)
            if (std::abs(row.at({0, j}) - y.at({i, j})) > 1e-12) std::exit(4);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
