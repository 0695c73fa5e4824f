// gelu: Y = X Phi(X)
//   none: Phi = (1 + erf(X / sqrt2)) / 2;  dX = dY (Phi + X phi),  phi = exp(-X^2 / 2) / sqrt(2 pi)
//   tanh: Phi ~ (1 + t) / 2,  t = tanh(u),  u = b (X + k X^3),  b = sqrt(2 / pi),  k = 0.044715;
//         dX = dY ((1 + t) / 2 + X (1 - t^2) b (1 + 3 k X^2) / 2)
//   tY = tX Y'(X): the same expressions with tX for dY

#include <tapegrad/ops/gelu.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/add.h>
#include <tapegrad/ops/erf.h>
#include <tapegrad/ops/erf_kernel.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/tanh.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

// Written as PyTorch writes them (M_SQRT1_2, M_SQRT2 * M_2_SQRTPI * 0.5), to round alike.
constexpr double kSqrt1_2 = std::numbers::sqrt2 / 2;
constexpr double kInvSqrt2Pi = 2 * std::numbers::inv_sqrtpi * kSqrt1_2 * 0.5;
constexpr double kBeta = std::numbers::sqrt2 * (2 * std::numbers::inv_sqrtpi) * 0.5;
constexpr double kKappa = 0.044715;

// The formulas, in ops, so create_graph can record them.
Tensor gelu_erf_grad(const Tensor& X, const Tensor& dY) {
  const Tensor one = scalar(1.0, X.dtype());
  const Tensor cdf = scale(add(erf(scale(X, kSqrt1_2)), one), 0.5);    // Phi(X)
  const Tensor pdf = scale(exp(scale(mul(X, X), -0.5)), kInvSqrt2Pi);  // phi(X)
  return mul(dY, add(cdf, mul(X, pdf)));
}

Tensor gelu_tanh_grad(const Tensor& X, const Tensor& dY) {
  const Tensor one = scalar(1.0, X.dtype());
  const Tensor X2 = mul(X, X);
  const Tensor t = tanh(scale(add(X, scale(mul(X, X2), kKappa)), kBeta));
  const Tensor du = scale(add(one, scale(X2, 3.0 * kKappa)), kBeta);  // du/dX
  const Tensor sech2 = sub(one, mul(t, t));
  return mul(dY, add(scale(add(t, one), 0.5), scale(mul(X, mul(sech2, du)), 0.5)));
}

// Entries a kernel call takes at most (its temporaries on the stack, in L1).
constexpr int64_t kChunk = 512;

// f(begin, end) over [0, n) in chunks of kChunk entries, the chunks shared among the threads from
// kPassParallelFrom entries: every chunk starts at a multiple of kChunk whatever the team, so
// each entry is computed alike (in a vectorised body or the scalar tail) on any thread count.
template <class F>
void by_chunks(int64_t n, const F& f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  detail::for_parts(
      chunks,
      [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
      },
      detail::pass_serial_below(kChunk));
}

static_assert(kChunk <= detail::kErfChunk);

// float32's Phi(X) = erfc(-X / sqrt2) / 2, vectorised (ops/erf_kernel.h: its relative accuracy
// holds in the left tail, where 1 + erf(X / sqrt2) cancels), and with `pdf` phi(X), n <= kChunk
// entries. (phi is 0 from |X| = 13.2 on, about where it leaves float's normal numbers:
// Eigen's exp clamps there differently for AVX2 and AVX-512; and X = +-inf then gives inf * 0 =
// NaN in X phi, as glibc's exp does.)
void normal_cdf(const float* x, float* cdf, float* pdf, int64_t n) {
  detail::erfc_abs(x, true, cdf, n);
  for (int64_t i = 0; i < n; ++i) {
    const float h = 0.5f * cdf[i];
    cdf[i] = detail::pick(x[i] > 0, 1.0f - h, h);
  }
  if (!pdf) return;
  // exp(-X^2 / 2) as exp(-h / 2) (1 - l / 2) for X^2 = h + l exactly: no digit of the argument
  // lost to the rounding of X^2 (4e-6 relative at |X| = 12).
  for (int64_t i = 0; i < n; ++i) pdf[i] = (x[i] * x[i]) * -0.5f;
  auto p = detail::MapArr<float>(pdf, n);
  p = p.exp();  // (alone: Eigen's select over it went entry by entry, through glibc's expf)
  for (int64_t i = 0; i < n; ++i) {
    float h, l;
    detail::exact_square(x[i], h, l);
    l *= -0.5f;
    const float phi = (pdf[i] + pdf[i] * l) * float(kInvSqrt2Pi);
    pdf[i] = detail::pick(std::fabs(x[i]) >= 13.2f, 0.0f, phi);
  }
}

// The same gradients in one pass over the elements.
template <class T>
void gelu_erf_kernel(const T* x, const T* dy, T* dx, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    Eigen::Array<float, kChunk, 1> cdf, pdf;
    normal_cdf(x, cdf.data(), pdf.data(), n);
    detail::MapArr<T>(dx, n) =
        detail::CMapArr<T>(dy, n) *
        (cdf.head(n) + detail::CMapArr<T>(x, n) * pdf.head(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T cdf = (std::erf(x[i] * T(kSqrt1_2)) + T(1)) * T(0.5);
    const T pdf = std::exp((x[i] * x[i]) * T(-0.5)) * T(kInvSqrt2Pi);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

// Below this |X|, s = 1/2 (exact to 1e-18 there): Y / X would lose digits to a subnormal Y.
constexpr double kHalfBelow = 0x1p-60;

// The tanh form's gradient from the output: s = (1 + t) / 2 = Y / X, so no tanh again (the
// backward took twice the forward's time recomputing it). 1 - t^2 = 4 s (1 - s), so
// dX = dY (s + 2 X s (1 - s) du). As accurate as the tanh form against a float64 reference
// (both round 1 + t near t = -1).
template <class T>
void gelu_tanh_kernel(const T* px, const T* py, const T* pdy, T* pdx, int64_t n) {
  auto x = detail::CMapArr<T>(px, n);
  const auto du = (T(1) + (x * x) * T(3.0 * kKappa)) * T(kBeta);
  Eigen::Array<T, kChunk, 1> buf;  // n <= kChunk (by_chunks)
  auto s = buf.head(n);
  s = (x.abs() < T(kHalfBelow)).select(T(0.5), detail::CMapArr<T>(py, n) / x);
  detail::MapArr<T>(pdx, n) =
      detail::CMapArr<T>(pdy, n) * (s + T(2) * x * (s * (T(1) - s)) * du);
}

// Y, and with tx its tangent tY = tx Y'(X) in the same pass (a forward-mode run that nothing
// differentiates: the tanh is computed once for both), n <= kChunk entries (by_chunks): the
// activations stay in L1 between the two. float64 goes through s = (1 + tanh(u)) / 2 =
// 1 / (1 + exp(-2 u)): Eigen's float64 tanh is glibc's scalar one (a quarter of a float64 GPT
// training step), its exp is vectorised; then Y = X s and tY as in the kernel above. For large
// -u, exp overflows to inf and s to 0, as tanh's 1 + t does. float keeps Eigen's own vectorised
// tanh.
template <class T>
void gelu_tanh_forward(const T* px, T* py, int64_t n, const T* ptx, T* pty) {
  auto x = detail::CMapArr<T>(px, n);
  const auto u = (x + x * x * x * T(kKappa)) * T(kBeta);
  if (!ptx) {
    if constexpr (std::is_same_v<T, double>)  // see above
      detail::MapArr<T>(py, n) = x * (T(1) + (T(-2) * u).exp()).inverse();
    else
      detail::MapArr<T>(py, n) = T(0.5) * x * (T(1) + u.tanh());
    return;
  }
  Eigen::Array<T, kChunk, 1> buf;
  auto tx = detail::CMapArr<T>(ptx, n);
  auto y = detail::MapArr<T>(py, n), ty = detail::MapArr<T>(pty, n);
  const auto du = (T(1) + (x * x) * T(3.0 * kKappa)) * T(kBeta);
  auto s = buf.head(n);
  if constexpr (std::is_same_v<T, double>) {
    s = (T(1) + (T(-2) * u).exp()).inverse();
    y = x * s;
    ty = tx * (s + T(2) * x * (s * (T(1) - s)) * du);
  } else {
    s = u.tanh();
    y = T(0.5) * x * (T(1) + s);
    ty = tx * ((s + T(1)) * T(0.5) + (x * ((T(1) - s * s) * du)) * T(0.5));
  }
}

// The same for the erf form.
template <class T>
void gelu_erf_forward(const T* x, T* y, int64_t n, const T* tx, T* ty) {
  if constexpr (std::is_same_v<T, float>) {
    Eigen::Array<float, kChunk, 1> cdf, pdf;
    normal_cdf(x, cdf.data(), tx ? pdf.data() : nullptr, n);
    const auto xs = detail::CMapArr<T>(x, n);
    detail::MapArr<T>(y, n) = xs * cdf.head(n);
    if (tx)
      detail::MapArr<T>(ty, n) = detail::CMapArr<T>(tx, n) * (cdf.head(n) + xs * pdf.head(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::erf(x[i] * T(kSqrt1_2));
    y[i] = x[i] * T(0.5) * (T(1) + e);
    if (!tx) continue;
    const T pdf = std::exp((x[i] * x[i]) * T(-0.5)) * T(kInvSqrt2Pi);
    ty[i] = tx[i] * ((e + T(1)) * T(0.5) + x[i] * pdf);
  }
}

}  // namespace

Tensor gelu(const Tensor& X, GeluApproximate approximate, const std::source_location& where) {
  detail::check_floating("gelu", X);
  const bool tanh_mode = approximate == GeluApproximate::tanh;
  Tensor Y(X.shape(), X.dtype());
  const Tensor tX = detail::fused_tangent(X);
  Tensor tY = tX.defined() ? Tensor(X.shape(), X.dtype()) : Tensor();
  dispatch(X.dtype(), [&]<class T>() {
    const T* tx = tX.defined() ? tX.data<T>() : nullptr;
    T* ty = tY.defined() ? tY.data<T>() : nullptr;
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    by_chunks(X.numel(), [&](int64_t b, int64_t e) {
      if (tanh_mode)
        gelu_tanh_forward<T>(x + b, y + b, e - b, tx ? tx + b : nullptr, ty ? ty + b : nullptr);
      else
        gelu_erf_forward<T>(x + b, y + b, e - b, tx ? tx + b : nullptr, ty ? ty + b : nullptr);
    });
  });
  Recording recorded = record("gelu", std::move(Y), {X}, where)
      .saves(X)
      .formula([X, tanh_mode](const Tensor& dY) -> Grads {
        return {tanh_mode ? gelu_tanh_grad(X, dY) : gelu_erf_grad(X, dY)};
      })
      .jvp([&](const Tangents& t) {  // by the forward's kernel when nothing differentiates it
        if (tY.defined()) return tY;
        return tanh_mode ? gelu_tanh_grad(X, t[0]) : gelu_erf_grad(X, t[0]);
      });
  // The kernels, one pass each: the tanh form's from X and the output (which the node then
  // keeps), the erf form's from X alone.
  if (tanh_mode)
    recorded.kernel([X](const Tensor& dY, const Tensor& Y) -> Grads {
      Tensor dX(X.shape(), X.dtype());
      dispatch(X.dtype(), [&]<class T>() {
        const T *x = X.data<T>(), *y = Y.data<T>(), *dy = dY.data<T>();
        T* dx = dX.data<T>();
        by_chunks(X.numel(), [&](int64_t b, int64_t e) {
          gelu_tanh_kernel<T>(x + b, y + b, dy + b, dx + b, e - b);
        });
      });
      return {dX};
    });
  else
    recorded.kernel([X](const Tensor& dY) -> Grads {
      Tensor dX(X.shape(), X.dtype());
      dispatch(X.dtype(), [&]<class T>() {
        const T *x = X.data<T>(), *dy = dY.data<T>();
        T* dx = dX.data<T>();
        by_chunks(X.numel(),
                  [&](int64_t b, int64_t e) { gelu_erf_kernel<T>(x + b, dy + b, dx + b, e - b); });
      });
      return {dX};
    });
  return recorded;
}

}  // namespace tg
