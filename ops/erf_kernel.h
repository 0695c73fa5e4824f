#pragma once
// float32's erf and erfc, vectorised (internal to ops/, not installed): the erf op and gelu's
// exact form (ops/gelu.cpp) on float32 tensors. glibc's erff is one call per entry (10 ns here,
// 40 times Eigen's vectorised exp), and Eigen's own vectorised erf is an absolute fit that loses
// all relative accuracy in erfc's tail, which gelu's Phi(x) = erfc(-x / sqrt 2) / 2 is for
// x < 0. Here erfc(a) = t exp(-a^2 + P(t)), t = 1 / (1 + a / 2) (Numerical Recipes' Chebyshev
// fit, relative error below 1.2e-7), with a^2 split exactly into two floats so that exp's
// argument keeps every digit: relative error below 4e-7 for erfc over a in [0, 9.3) (float's
// erfc is at most a denormal past it, taken as 0), and erf within 3 units in the last place
// (near 0 by its series). float64 keeps glibc's erf.

#include <cstdint>

namespace tg::detail {

/// Entries the kernels below take at most per call (their temporaries on the stack).
inline constexpr int64_t kErfChunk = 512;

/// e[i] = erfc(|x[i]|), or erfc(|x[i]| / sqrt 2) when `over_sqrt2` (gelu's Phi), for n <=
/// kErfChunk entries; NaN gives NaN. The square in exp's argument is x^2 or x^2 / 2 exactly,
/// never the square of a rounded |x| / sqrt 2.
void erfc_abs(const float* x, bool over_sqrt2, float* e, int64_t n);
/// y[i] = erf(x[i]) for n <= kErfChunk entries (y may be x).
void erf_values(const float* x, float* y, int64_t n);

}  // namespace tg::detail
