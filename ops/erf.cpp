// erf: Y = 2/sqrt(pi) int_0^X exp(-t^2) dt;  dX = dY 2/sqrt(pi) exp(-X^2);
//   tY = tX 2/sqrt(pi) exp(-X^2)

#include <tapegrad/ops/erf.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/erf_kernel.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace detail {

void erfc_abs(const float* x, bool over_sqrt2, float* pe, int64_t n) {
  // a (rounded) is only the fit's variable; a^2 = x^2 k, k = 1 or 1/2, is kept exact below.
  const float scale = over_sqrt2 ? float(std::numbers::sqrt2 / 2) : 1.0f;
  const float k = over_sqrt2 ? 0.5f : 1.0f;
  Eigen::Array<float, kErfChunk, 1> tb, sb, cb;
  auto s = sb.head(n);
  float *t = tb.data(), *c = cb.data();
  for (int64_t i = 0; i < n; ++i) {  // (vectorised by the compiler: no branch)
    const float a = std::abs(x[i]) * scale;
    const float ti = 1.0f / (1.0f + 0.5f * a);
    const float p =
        -1.26551223f +
        ti * (1.00002368f +
              ti * (0.37409196f +
                    ti * (0.09678418f +
                          ti * (-0.18628806f +
                                ti * (0.27886807f +
                                      ti * (-1.13520398f +
                                            ti * (1.48851587f +
                                                  ti * (-0.82215223f + ti * 0.17087277f))))))));
    // a^2 = hi + lo exactly (x^2 split, times k, a power of two), and p - hi = si + err exactly
    // (TwoSum): the argument is si + (err - lo) to within a rounding of that small sum, and
    // exp(si) (1 + err - lo) its exponential.
    float hi, lo;
    exact_square(x[i], hi, lo);
    hi *= k;
    lo *= k;
    const float si = p - hi, bp = si + hi;
    const float err = (-hi - (si - bp)) + (p - bp);
    // From 9.19 on, erfc is under 1.3e-38, at the edge of the normal floats: 0 (exp(si) would be
    // near Eigen's clamp, which differs between its AVX2 and AVX-512 code; inf's lo is NaN).
    const bool beyond = !(a < 9.19f) && a == a;  // (NaN stays NaN through t)
    t[i] = pick(beyond, 0.0f, ti);
    s[i] = pick(beyond, 0.0f, si);
    c[i] = pick(beyond, 0.0f, err - lo);
  }
  s = s.exp();
  for (int64_t i = 0; i < n; ++i) pe[i] = t[i] * (s[i] + s[i] * c[i]);
}

void erf_values(const float* x, float* y, int64_t n) {
  Eigen::Array<float, kErfChunk, 1> eb;
  float* e = eb.data();
  erfc_abs(x, false, e, n);
  for (int64_t i = 0; i < n; ++i) {
    // Below 0.7, the series 2/sqrt(pi) sum_k (-1)^k x^(2k+1) / (k! (2k + 1)), k to 8 (the next
    // term under 3e-10 of the sum there); past it, 1 - erfc(|x|) with x's sign (at 1/2, erfc's
    // relative error would have cost erf 3.2 units through the difference).
    const float z = x[i], z2 = z * z;
    const float series =
        z * (1.1283791670955126f +
             z2 * (-0.37612638903183754f +
                   z2 * (0.11283791670955126f +
                         z2 * (-0.026866170645131252f +
                               z2 * (0.0052239776254421878f +
                                     z2 * (-0.00085483270234508529f +
                                           z2 * (0.00012055332981789664f +
                                                 z2 * (-1.492565035840625e-05f +
                                                       z2 * 1.6462114365889246e-06f))))))));
    const float far = std::copysign(1.0f - e[i], z);
    y[i] = pick(std::abs(z) < 0.7f, series, far);
  }
}

}  // namespace detail

Tensor erf(const Tensor& X, const std::source_location& where) {
  detail::check_floating("erf", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    const int64_t n = X.numel(), chunks = (n + detail::kErfChunk - 1) / detail::kErfChunk;
    // Chunks of kErfChunk entries, shared among the threads from kPassParallelFrom entries.
    detail::for_parts(
        chunks,
        [&](int64_t begin, int64_t end) {
          for (int64_t c = begin; c < end; ++c) {
            const int64_t b = c * detail::kErfChunk, e = std::min(n, b + detail::kErfChunk);
            if constexpr (std::is_same_v<T, float>)
              detail::erf_values(x + b, y + b, e - b);
            else
              for (int64_t i = b; i < e; ++i) y[i] = std::erf(x[i]);
          }
        },
        detail::pass_serial_below(detail::kErfChunk));
  });
  return record("erf", std::move(Y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads {
        return {mul(dY, scale(exp(scale(mul(X, X), -1.0)), 2.0 / std::sqrt(std::numbers::pi)))};
      })
      .jvp([&](const Tangents& t) {
        return mul(t[0], scale(exp(scale(mul(X, X), -1.0)), 2.0 / std::sqrt(std::numbers::pi)));
      });
}

}  // namespace tg
