#pragma once
// float32's erf and erfc, vectorised (internal to ops/, not installed): the erf op and gelu's
// exact form (ops/gelu.cpp) on float32 tensors. glibc's erff is one call per entry (10 ns here,
// 40 times Eigen's vectorised exp), and Eigen's own vectorised erf is an absolute fit that loses
// all relative accuracy in erfc's tail, which gelu's Phi(x) = erfc(-x / sqrt 2) / 2 is for
// x < 0. Here erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a / 2) (Numerical Recipes' Chebyshev
// fit, relative error below 1.2e-7), with a^2 split exactly into two floats so that exp's
// argument keeps every digit: relative error below 7e-7 for erfc over a in [0, 9.19) (Eigen's
// exp is less exact with AVX-512 than with AVX2; past 9.19 erfc is at the edge of float's normal
// numbers or below, taken as 0), and erf within 3 units in the last place (near 0 by
// its series, to 0.7). float64 keeps glibc's erf. The loops' choices are bit masks (pick, in
// ops/op_util.h), not ?: on floats, which GCC keeps as branches for AVX2 (and then does not
// vectorise the loop).

#include <cmath>
#include <cstdint>

namespace tg::detail {

/// x^2 = hi + lo exactly (barring overflow, and underflow below |x| = 2^-51): lo by FMA where the
/// CPU has one, else by Veltkamp's split of x into halves whose products are exact (a build
/// without -march: std::fma would be a call per entry there).
inline void exact_square(float x, float& hi, float& lo) {
  hi = x * x;
#ifdef __FMA__
  lo = std::fma(x, x, -hi);
#else
  const float c = 4097.0f * x;  // 2^12 + 1
  const float xh = c - (c - x), xl = x - xh;
  lo = ((xh * xh - hi) + 2.0f * xh * xl) + xl * xl;
#endif
}

/// Entries the kernels below take at most per call (their temporaries on the stack).
inline constexpr int64_t kErfChunk = 512;

/// e[i] = erfc(|x[i]|), or erfc(|x[i]| / sqrt 2) when `over_sqrt2` (gelu's Phi), for n <=
/// kErfChunk entries; NaN gives NaN. The square in exp's argument is x^2 or x^2 / 2 exactly,
/// never the square of a rounded |x| / sqrt 2.
void erfc_abs(const float* x, bool over_sqrt2, float* e, int64_t n);
/// y[i] = erf(x[i]) for n <= kErfChunk entries (y may be x).
void erf_values(const float* x, float* y, int64_t n);

}  // namespace tg::detail
