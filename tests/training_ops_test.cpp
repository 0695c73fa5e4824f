// The training ops (div, exp, log, tanh, sqrt, rsqrt, relu, gelu, erf, mean, layer_norm,
// linear, log_softmax, logsumexp, softplus, binary_cross_entropy_with_logits): forward values
// against plain loops in double (softmax and log_softmax along another axis against the
// transposed last axis), kernel and formula agreeing on every registry case, float32
// accumulation, and a table of bad inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/check/registry.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Dtype;
using tg::Shape;
using tg::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) || std::isnan(want[i])) {
      EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
          << what << " at " << i << ": " << got[i] << " vs " << want[i];
      continue;
    }
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
  }
}

std::vector<double> map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y(x.size());
  std::transform(x.begin(), x.end(), y.begin(), f);
  return y;
}

TEST(TrainingOps, ElementwiseMatchPlainLoops) {
  tg::Rng rng(1);
  const Tensor x = tg::randn({3, 7}, rng, Dtype::f64, 2.0);
  const Tensor p = tg::uniform({3, 7}, rng, 0.01, 5.0);
  const auto xv = x.to_vector(), pv = p.to_vector();
  expect_close(tg::exp(x).to_vector(), map(xv, [](double v) { return std::exp(v); }), 1e-15, "exp");
  expect_close(tg::log(p).to_vector(), map(pv, [](double v) { return std::log(v); }), 1e-15, "log");
  expect_close(tg::tanh(x).to_vector(), map(xv, [](double v) { return std::tanh(v); }), 1e-15,
               "tanh");
  expect_close(tg::sqrt(p).to_vector(), map(pv, [](double v) { return std::sqrt(v); }), 1e-15,
               "sqrt");
  expect_close(tg::rsqrt(p).to_vector(), map(pv, [](double v) { return 1 / std::sqrt(v); }), 1e-15,
               "rsqrt");
  expect_close(tg::relu(x).to_vector(), map(xv, [](double v) { return v > 0 ? v : 0.0; }), 0,
               "relu");
  expect_close(tg::erf(x).to_vector(), map(xv, [](double v) { return std::erf(v); }), 1e-15, "erf");
}

TEST(TrainingOps, ElementwiseEdgeValues) {
  const Tensor x = tg::from_vector({-kInf, -1000, -750, 0, 750, kInf, NAN}, {7});
  expect_close(tg::exp(x).to_vector(), {0, 0, std::exp(-750.0), 1, kInf, kInf, NAN}, 1e-15, "exp");
  EXPECT_EQ(tg::exp(tg::from_vector({-kInf}, {1}, Dtype::f32)).item(), 0.0);
  expect_close(tg::log(tg::from_vector({0, -1, kInf, 1}, {4})).to_vector(), {-kInf, NAN, kInf, 0},
               0, "log");
  expect_close(tg::relu(tg::from_vector({NAN, -kInf, kInf, -0.0}, {4})).to_vector(),
               {NAN, 0, kInf, 0}, 0, "relu");
  expect_close(tg::tanh(tg::from_vector({-kInf, 40, kInf}, {3})).to_vector(), {-1, 1, 1}, 0,
               "tanh");
  expect_close(tg::rsqrt(tg::from_vector({0, kInf, 4}, {3})).to_vector(), {kInf, 0, 0.5}, 0,
               "rsqrt");
}

// float32's exp checks its entries by blocks of 1,024 for any past Eigen's clamp (ops/exp.cpp),
// the blocks shared among the threads past 2^15 entries: entries outside it in later blocks,
// among ordinary ones, still take glibc's value exactly.
TEST(TrainingOps, Float32ExpOutsideTheClampInLaterBlocks) {
  std::vector<double> xv(40000);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.1 * double(i)) * 5;
  xv[10] = 100;       // inf (Eigen's clamp gives a finite number)
  xv[1500] = NAN;
  xv[2100] = -100;    // a denormal float (Eigen's clamp gives a normal one, or 0)
  xv[25000] = -kInf;  // 0
  xv[39999] = -88;    // a denormal float, past the check's bound of -87
  const Tensor y = tg::exp(tg::from_vector(xv, {40000}, Dtype::f32));
  const float* py = y.data<float>();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const float want = std::exp(float(xv[i]));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(py[i])) << i;
    else if (std::isinf(want) || want < 1e-37f)
      EXPECT_EQ(py[i], want) << "x = " << xv[i];
    else
      EXPECT_NEAR(py[i], want, 4e-7 * want) << "x = " << xv[i];
  }
  EXPECT_EQ(py[25000], 0.0f);
  EXPECT_GT(py[2100], 0.0f);
}

// Units in the last place of float32 between `got` and the double `want`: |got - want| over the
// spacing of floats at float(want).
double float_ulps(float got, double want) {
  const float w = float(want);
  const float up = std::nextafter(std::fabs(w), std::numeric_limits<float>::infinity());
  const float step = up - std::fabs(w);
  return std::fabs(double(got) - want) / double(step);
}

// The largest error in float32 units over xs, and where.
std::pair<double, float> worst_ulps(const std::vector<float>& xs, const std::vector<float>& got,
                                    const std::function<double(double)>& f) {
  std::pair<double, float> worst{0, 0};
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double u = float_ulps(got[i], f(double(xs[i])));
    if (u > worst.first) worst = {u, xs[i]};
  }
  return worst;
}

// float32's erf is vectorised (ops/erf_kernel.h): within 4 units in the last place of the exact
// erf (glibc's, in double) over a fine grid of [-10, 10], tiny and denormal arguments, ties of
// sign, and the series' and the erfc form's meeting at 1/2; +-0, +-inf and NaN as glibc's.
// Negative control: results 6 units off are seen.
TEST(TrainingOps, Float32ErfWithinFourUnitsInTheLastPlace) {
  std::vector<float> xs;
  for (int i = -400000; i <= 400000; ++i) xs.push_back(float(i) * 2.5e-5f);
  for (float v = 1e-44f; v < 1e-2f; v *= 1.37f) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  for (float v : {0.5f, std::nextafter(0.5f, 0.0f), 9.2f, 9.3f, 9.4f, 30.0f, 1e30f}) {
    xs.push_back(v);
    xs.push_back(-v);
  }
  const int64_t n = int64_t(xs.size());
  std::vector<double> xd(xs.begin(), xs.end());
  const auto got = tg::erf(tg::from_vector(xd, {n}, Dtype::f32)).to_vector();
  const std::vector<float> gf(got.begin(), got.end());
  const auto erf = [](double v) { return std::erf(v); };
  const auto [worst, at] = worst_ulps(xs, gf, erf);
  EXPECT_LE(worst, 4.0) << "at x = " << at;
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_EQ(std::signbit(gf[i]), std::signbit(xs[i])) << "x = " << xs[i];
  std::vector<float> off(gf);
  for (float& v : off)
    for (int k = 0; k < 6; ++k) v = std::nextafter(v, 0.0f);
  EXPECT_GT(worst_ulps(xs, off, erf).first, 4.0);  // negative control
  const auto edge =
      tg::erf(tg::from_vector({0.0, -0.0, kInf, -kInf, NAN}, {5}, Dtype::f32)).to_vector();
  EXPECT_EQ(edge[0], 0.0);
  EXPECT_TRUE(std::signbit(edge[1]));
  EXPECT_EQ(edge[2], 1.0);
  EXPECT_EQ(edge[3], -1.0);
  EXPECT_TRUE(std::isnan(edge[4]));
}

// float32's exact gelu computes Phi(x) as erfc(-x / sqrt 2) / 2 (ops/gelu.cpp): relatively
// accurate in the left tail, where 1 + erf(x / sqrt 2) in float cancels, its exps' arguments
// x^2 / 2 kept exact. Y and dX (dY random) within 1e-6 relative of float64's over [-12, 8] (4.9e-7
// and 3.6e-7 the worst seen; the squares of rounded values cost up to 4e-6 at -12); the
// cancelling form, evaluated here with glibc's erff, is off by far more there (negative
// control). And +-inf, NaN as before: gelu(-inf) = -inf * 0 is NaN, as PyTorch's.
TEST(TrainingOps, Float32ExactGeluKeepsItsRelativeAccuracyInTheTail) {
  std::vector<double> xd;
  for (int i = 0; i <= 4000; ++i) xd.push_back(-12.0 + 20.0 * i / 4000.0);
  const int64_t n = int64_t(xd.size());
  for (double& v : xd) v = double(float(v));
  tg::Rng rng(3);
  const Tensor dy = tg::randn({n}, rng, Dtype::f32);
  const Tensor x = tg::from_vector(xd, {n}, Dtype::f32).set_requires_grad();
  const Tensor y = tg::gelu(x);
  tg::sum(tg::mul(y, dy)).backward();
  const auto yv = y.to_vector(), gv = x.grad().to_vector(), dyv = dy.to_vector();
  const double kSqrt1_2 = std::sqrt(0.5), kInvSqrt2Pi = 1 / std::sqrt(2 * M_PI);
  double worst_y = 0, worst_g = 0, worst_cancelling = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = xd[i];
    const double cdf = 0.5 * std::erfc(-v * kSqrt1_2);
    const double pdf = std::exp(-0.5 * v * v) * kInvSqrt2Pi;
    const double want_y = v * cdf, want_g = dyv[i] * (cdf + v * pdf);
    if (want_y != 0) worst_y = std::max(worst_y, std::fabs(yv[i] - want_y) / std::fabs(want_y));
    // (dX relative to its terms' size: Phi + X phi crosses 0 near X = -0.75, gelu's minimum.)
    const double terms = std::fabs(dyv[i]) * (cdf + std::fabs(v) * pdf);
    if (terms != 0) worst_g = std::max(worst_g, std::fabs(gv[i] - want_g) / terms);
    const float fv = float(v);
    const float cancelling = 0.5f * fv * (1.0f + std::erf(fv * float(kSqrt1_2)));
    if (want_y != 0)
      worst_cancelling =
          std::max(worst_cancelling, std::fabs(cancelling - want_y) / std::fabs(want_y));
  }
  EXPECT_LT(worst_y, 1e-6);
  EXPECT_LT(worst_g, 1e-6);
  EXPECT_GT(worst_cancelling, 1e-2);  // negative control
  const auto edge =
      tg::gelu(tg::from_vector({kInf, -kInf, NAN, 0.0}, {4}, Dtype::f32)).to_vector();
  EXPECT_EQ(edge[0], kInf);
  EXPECT_TRUE(std::isnan(edge[1]));
  EXPECT_TRUE(std::isnan(edge[2]));
  EXPECT_EQ(edge[3], 0.0);
}

// float32's erf, exact gelu (forward and backward) and exp past 2^15 entries: their chunks and
// blocks start at fixed multiples whatever the team, so one thread and two give the same bits;
// softmax's and log_softmax's rows (forward and kernels) each go whole to one thread.
TEST(TrainingOps, Float32ErfGeluExpAndSoftmaxGiveTheSameBitsOnOneThreadAndTwo) {
  tg::Rng rng(5);
  const Tensor x = tg::randn({70001}, rng, Dtype::f32, 4.0);
  const Tensor dy = tg::randn({70001}, rng, Dtype::f32);
  const Tensor s = tg::randn({301, 130}, rng, Dtype::f32, 3.0);
  const Tensor ds = tg::randn({301, 130}, rng, Dtype::f32);
  const auto run = [&](int threads) {
    const tg::test::ThreadCount count(threads);
    const Tensor xr = x.detach().set_requires_grad();
    const Tensor g = tg::gelu(xr);
    tg::sum(tg::mul(g, dy)).backward();
    const Tensor sr = s.detach().set_requires_grad();
    const Tensor p = tg::softmax(sr), lp = tg::log_softmax(sr);
    tg::sum(tg::add(tg::mul(p, ds), tg::mul(lp, ds))).backward();
    return std::vector<Tensor>{tg::erf(x), g.detach(), xr.grad(), tg::exp(x),
                               p.detach(), lp.detach(), sr.grad()};
  };
  const auto one = run(1), two = run(2);
  for (std::size_t k = 0; k < one.size(); ++k)
    EXPECT_TRUE(tg::test::same_bytes(one[k], two[k])) << "output " << k;
}

// exp, softmax and log_softmax give every entry the same bits wherever its row starts: 17 equal
// rows of 37 entries (each starting at another offset from the 64-byte line) give 17 equal rows
// out, forward and both backward kernels. (With exp over a dynamic Eigen map, the entries before
// the first aligned one and after the last whole packet went through libm, and Eigen's sums
// started their packets at the first aligned entry: rows differed in their last bits.)
TEST(TrainingOps, ExpAndSoftmaxRowsGiveTheSameBitsWhereverTheyStart) {
  for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
    tg::Rng rng(7);
    const std::vector<double> row = tg::randn({37}, rng, Dtype::f64, 3.0).to_vector();
    std::vector<double> rows;
    for (int r = 0; r < 17; ++r) rows.insert(rows.end(), row.begin(), row.end());
    const Tensor x = tg::from_vector(rows, {17, 37}, dtype).set_requires_grad();
    const Tensor xs = tg::from_vector(rows, {17, 37}, dtype).set_requires_grad();
    const Tensor w = tg::from_vector(rows, {17, 37}, dtype);
    const Tensor e = tg::exp(x), p = tg::softmax(xs), lp = tg::log_softmax(x);
    tg::sum(tg::add(tg::mul(lp, w), tg::mul(p, w))).backward();
    const std::vector<Tensor> outs{e, p, lp, x.grad(), xs.grad()};
    for (std::size_t o = 0; o < outs.size(); ++o) {
      const Tensor& t = outs[o];
      const auto v = t.to_vector();
      for (int r = 1; r < 17; ++r)
        for (int k = 0; k < 37; ++k)
          ASSERT_EQ(v[r * 37 + k], v[k]) << tg::dtype_name(dtype) << " output " << o << " row " << r
                                       << " entry " << k;
    }
  }
}

// (B, 70, C) entries, N(0, 3^2), whose slices along axis 1 (columns) include: two fully masked
// (the second in the last column, so in the last, short block), one -inf but for a NaN, one
// partly masked, one with a NaN among finite entries, one with +inf. B is 3 for a wide slab, 100
// for a narrow one (500 slices: enough for a team).
struct SpecialColumns {
  int64_t B = 0, n = 70;
  std::array<int64_t, 6> columns{};  // dead0, dead1, nan_masked, partly, nan_finite, pinf
  std::vector<double> values;
};

SpecialColumns special_columns(int64_t C, tg::Rng& rng) {
  const bool wide = C > 16;
  SpecialColumns sc;
  sc.B = wide ? 3 : 100;
  sc.columns = {wide ? 5 : 0, C - 1, wide ? 7 : 2, wide ? 300 : 3, wide ? 600 : 3, wide ? 17 : 1};
  const auto [dead0, dead1, nan_masked, partly, nan_finite, pinf] = sc.columns;
  const int64_t n = sc.n;
  sc.values = tg::randn({sc.B, n, C}, rng, Dtype::f64, 3.0).to_vector();
  auto at = [&](int64_t b, int64_t k, int64_t c) -> double& {
    return sc.values[(b * n + k) * C + c];
  };
  for (int64_t k = 0; k < n; ++k) {
    at(0, k, dead0) = -kInf;
    at(1, k, dead1) = -kInf;
    at(1, k, nan_masked) = -kInf;
    if (k % 3) at(2, k, partly) = -kInf;
  }
  at(1, 40, nan_masked) = std::numeric_limits<double>::quiet_NaN();
  at(0, 13, nan_finite) = std::numeric_limits<double>::quiet_NaN();
  at(2, 69, pinf) = kInf;
  return sc;
}

// softmax and log_softmax along an axis that is not the last work each slab's columns a block at
// a time (ops/axis_columns.h), or a slice at a time when the slabs are narrow. Against the last
// axis of the transposed tensor (the row path), over columns spread across several blocks with a
// short last one, and over 5 columns: within a few units in the last place (only the order of
// the sums differs), forward and both backward kernels (dY random); a fully masked column gives
// zeros (log_softmax -inf, zero gradient), a partly masked one zeros where masked; a NaN makes
// its column NaN, among finite entries or -inf ones, and so does +inf; one thread and two give
// the same bits.
TEST(TrainingOps, SoftmaxAlongAnotherAxisMatchesTheTransposedLastAxis) {
  // 1100 columns: blocks of 224 in float32 (112 in float64), the last short; 5: a slice at a time
  for (const int64_t C : {int64_t{1100}, int64_t{5}})
    for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
      const std::string dt = std::string(tg::dtype_name(dtype)) + " C " + std::to_string(C);
      tg::Rng rng(11);
      const SpecialColumns sc = special_columns(C, rng);
      const int64_t B = sc.B, n = sc.n;
      const std::vector<double>& v = sc.values;
      const auto [dead0, dead1, nan_masked, partly, nan_finite, pinf] = sc.columns;
      const Tensor x = tg::from_vector(v, {B, n, C}, dtype), dy = tg::randn({B, n, C}, rng, dtype);
      const auto run = [&](int threads) {
        const tg::test::ThreadCount count(threads);
        const Tensor xr = x.detach().set_requires_grad(), xs = x.detach().set_requires_grad();
        const Tensor p = tg::softmax(xs, 1), lp = tg::log_softmax(xr, -2);
        tg::sum(tg::add(tg::mul(lp, dy), tg::mul(p, dy))).backward();
        return std::vector<Tensor>{p.detach(), lp.detach(), xr.grad(), xs.grad()};
      };
      const auto one = run(1), two = run(2);
      for (std::size_t k = 0; k < one.size(); ++k)
        EXPECT_TRUE(tg::test::same_bytes(one[k], two[k])) << dt << " output " << k;

      const Tensor xt = tg::transpose(x, 1, 2).detach().set_requires_grad();
      const Tensor xst = tg::transpose(x, 1, 2).detach().set_requires_grad();
      const Tensor dyt = tg::transpose(dy, 1, 2);
      tg::sum(tg::add(tg::mul(tg::log_softmax(xt), dyt), tg::mul(tg::softmax(xst), dyt)))
          .backward();
      const std::vector<Tensor> want{
          tg::transpose(tg::softmax(xt), 1, 2), tg::transpose(tg::log_softmax(xt), 1, 2),
          tg::transpose(xt.grad(), 1, 2), tg::transpose(xst.grad(), 1, 2)};
      // log_softmax's entries X - max - log(sum) on the scale of 1 + |Y| (the log of a sum near 1
      // has an absolute error), the gradients (dY - exp(Y) sum(dY), Y (dY - sum(dY Y))) on that of
      // their column's sum of |dY|.
      const std::vector<double> g = dy.to_vector();
      std::vector<double> col_abs(B * C, 0.0);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < n; ++k)
          for (int64_t c = 0; c < C; ++c) col_abs[b * C + c] += std::fabs(g[(b * n + k) * C + c]);
      const double rtol = dtype == Dtype::f32 ? 1e-6 : 1e-14;
      for (std::size_t o = 0; o < want.size(); ++o) {
        const std::vector<double> got = one[o].to_vector(), w = want[o].to_vector();
        int bad = 0;
        for (int64_t i = 0; i < static_cast<int64_t>(w.size()) && bad < 5; ++i) {
          const int64_t b = i / (n * C), c = i % C;
          const double scale = std::fabs(w[i]) + (o == 1 ? 1.0 : o >= 2 ? col_abs[b * C + c] : 0.0);
          const bool same = std::isnan(w[i])   ? std::isnan(got[i])
                            : std::isinf(w[i]) ? got[i] == w[i]
                                               : std::fabs(got[i] - w[i]) <= rtol * scale;
          if (!same) ++bad;
          EXPECT_TRUE(same) << dt << " output " << o << " at " << i << ": " << got[i] << " vs "
                            << w[i];
        }
      }
      // The special columns themselves, whatever the row path gives.
      const std::vector<double> p = one[0].to_vector(), lp = one[1].to_vector(),
                                dx = one[2].to_vector();
      auto entry = [&](const std::vector<double>& t, int64_t b, int64_t k, int64_t c) {
        return t[(b * n + k) * C + c];
      };
      for (int64_t k = 0; k < n; ++k) {
        for (auto [b, c] : {std::pair<int64_t, int64_t>{0, dead0}, {1, dead1}}) {
          EXPECT_EQ(entry(p, b, k, c), 0.0) << dt;
          EXPECT_EQ(entry(lp, b, k, c), -kInf) << dt;
          EXPECT_EQ(entry(dx, b, k, c), 0.0) << dt;
        }
        for (auto [b, c] :
             {std::pair<int64_t, int64_t>{1, nan_masked}, {0, nan_finite}, {2, pinf}}) {
          EXPECT_TRUE(std::isnan(entry(p, b, k, c))) << dt << " column " << c << " row " << k;
          EXPECT_TRUE(std::isnan(entry(lp, b, k, c))) << dt << " column " << c << " row " << k;
        }
        if (k % 3) {
          EXPECT_EQ(entry(p, 2, k, partly), 0.0) << dt;
        }
      }
    }
}

// logsumexp takes its exps by detail::exp_into (vectorised, in the input's type), summed in
// double for float32: along the last axis (rows) and another (column blocks, ops/axis_columns.h,
// or a slice at a time for 5 columns), within a unit in the last place of float32 (plus 4e-7
// absolute, the float exps' error) of a plain loop in double with glibc's exp, float64 within
// 1e-14; a fully masked slice gives -inf, +inf gives inf, a NaN NaN (among finite entries or -inf
// ones); an empty axis -inf; one thread and two the same bits.
TEST(TrainingOps, LogsumexpMatchesAPlainLoopAlongEveryAxis) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const int64_t C : {int64_t{1100}, int64_t{5}}) {  // column blocks; a slice at a time
    tg::Rng rng(13);
    const SpecialColumns sc = special_columns(C, rng);
    const int64_t B = sc.B, n = sc.n;
    const std::vector<double>& v = sc.values;
    const auto [dead0, dead1, nan_masked, partly, nan_finite, pinf] = sc.columns;
    for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
      const std::string dt = std::string(tg::dtype_name(dtype)) + " C " + std::to_string(C);
      const Tensor x = tg::from_vector(v, {B, n, C}, dtype);
      const std::vector<double> xs = x.to_vector();  // (as rounded to the dtype)
      const auto run = [&](int threads) {
        const tg::test::ThreadCount count(threads);
        return std::vector<Tensor>{tg::logsumexp(x, 1), tg::logsumexp(tg::transpose(x, 1, 2), -1)};
      };
      const auto one = run(1), two = run(2);
      for (std::size_t k = 0; k < one.size(); ++k)
        EXPECT_TRUE(tg::test::same_bytes(one[k], two[k])) << dt << " output " << k;
      for (const Tensor& got_t : one) {
        ASSERT_EQ(got_t.shape(), Shape({B, C}));
        const std::vector<double> got = got_t.to_vector();
        int bad = 0;
        for (int64_t b = 0; b < B && bad < 5; ++b)
          for (int64_t c = 0; c < C && bad < 5; ++c) {
            double m = -kInf, s = 0;
            bool has_nan = false;
            for (int64_t k = 0; k < n; ++k) {
              const double e = xs[(b * n + k) * C + c];
              has_nan = has_nan || std::isnan(e);
              m = std::max(m, e);
            }
            if (std::isinf(m)) m = 0;
            for (int64_t k = 0; k < n; ++k) s += std::exp(xs[(b * n + k) * C + c] - m);
            const double want = has_nan ? nan : std::log(s) + m, g = got[b * C + c];
            const float wf = static_cast<float>(want);
            const double tol = dtype == Dtype::f32 ? 4e-7 + (std::nextafter(wf, INFINITY) - wf)
                                                   : 1e-14 * (1 + std::fabs(want));
            const bool same = std::isnan(want)   ? std::isnan(g)
                              : std::isinf(want) ? g == want
                                                 : std::fabs(g - want) <= tol;
            if (!same) ++bad;
            EXPECT_TRUE(same) << dt << " (" << b << ", :, " << c << "): " << g << " vs " << want;
          }
        EXPECT_EQ(got[0 * C + dead0], -kInf) << dt;
        EXPECT_EQ(got[1 * C + dead1], -kInf) << dt;
        EXPECT_EQ(got[2 * C + pinf], kInf) << dt;
        EXPECT_TRUE(std::isnan(got[1 * C + nan_masked]) && std::isnan(got[0 * C + nan_finite]))
            << dt;
      }
      const Tensor empty = tg::logsumexp(tg::zeros({2, 0, 3}, dtype), 1);
      EXPECT_EQ(empty.shape(), Shape({2, 3}));
      for (double e : empty.to_vector()) EXPECT_EQ(e, -kInf) << dt;
    }
  }
}

// Within 4 units in the last place (of `scale`, and 4 spacings of denormals, where exp's
// results lose digits); NaN for NaN, the same infinity for one.
bool within_four_units(double got, long double want, double scale, bool f32) {
  const double eps = f32 ? 0x1p-23 : 0x1p-52, tiny = f32 ? 0x1p-149 : 0x1p-1074;
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= 4 * (eps * scale + tiny);
}

// exp's range in the dtype and past it, evenly: [-120, 100] in float32 (exp(-100) is a denormal,
// exp(88.7) the largest float), [-800, 720] in float64 (709.8), 70,001 points (past 2^15, so
// chunks go to the team); then 0, -0, +-inf and NaN.
Tensor exp_range_grid(Dtype dtype) {
  const bool f32 = dtype == Dtype::f32;
  const double lo = f32 ? -120 : -800, hi = f32 ? 100 : 720;
  std::vector<double> xs;
  for (int i = 0; i <= 70000; ++i) xs.push_back(lo + (hi - lo) * i / 70000.0);
  const double inf = std::numeric_limits<double>::infinity();
  xs.insert(xs.end(), {0.0, -0.0, inf, -inf, std::numeric_limits<double>::quiet_NaN()});
  return tg::from_vector(xs, {static_cast<int64_t>(xs.size())}, dtype);
}

// softplus is vectorised (exp by detail::exp_into, log1p by detail::log1p_into, the switch by
// bit masks): Y and its backward kernel's dX (dY random) within 4 units in the last place of the
// formula in long double from the rounded beta x, over exp's range and past it ([-120, 100] in
// float32, [-800, 720] in float64), beta 1 and -1.5, thresholds 20 and 5, and 1000 (exp(beta x)
// up to the dtype's largest and past it: y log(u) in log1p's form overflowed there, and dY z
// with |dY| = 4; past it Y is X and dX dY), with +-inf and NaN as the formula gives them; one
// thread and two the same bits. Negative control: the cancelling form log(1 + exp(x)) in the
// dtype fails the same check at x = -30.
TEST(TrainingOps, SoftplusWithinFourUnitsOfTheFormula) {
  for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
    const bool f32 = dtype == Dtype::f32;
    const std::string dt = tg::dtype_name(dtype);
    const Tensor x = exp_range_grid(dtype);
    const int64_t n = x.numel();
    tg::Rng rng(17);
    const std::vector<double> xv = x.to_vector();
    std::vector<double> g = tg::randn({n}, rng, Dtype::f64).to_vector();
    for (int64_t i = 0; i < n; ++i)  // dY exp(beta X) past the largest value near exp's edge
      if (xv[i] > (f32 ? 80 : 700)) g[i] = i % 2 ? 4.0 : -4.0;
    const Tensor dy = tg::from_vector(g, {n}, dtype);
    for (auto [beta, threshold] : {std::pair{1.0, 20.0}, {-1.5, 20.0}, {1.0, 5.0}, {1.0, 1000.0}}) {
      const auto run = [&](int threads) {
        const tg::test::ThreadCount count(threads);
        const Tensor xr = x.detach().set_requires_grad();
        const Tensor y = tg::softplus(xr, beta, threshold);
        tg::sum(tg::mul(y, dy)).backward();
        return std::vector<Tensor>{y.detach(), xr.grad()};
      };
      const auto one = run(1), two = run(2);
      for (std::size_t k = 0; k < one.size(); ++k)
        EXPECT_TRUE(tg::test::same_bytes(one[k], two[k])) << dt << " output " << k;
      const std::vector<double> y = one[0].to_vector(), dx = one[1].to_vector();
      int bad = 0;
      for (int64_t i = 0; i < n && bad < 5; ++i) {
        using L = long double;
        // beta x rounded as the op rounds it (the formula's own input), the rest exact
        const double bx = f32 ? double(float(xv[i]) * float(beta)) : xv[i] * beta;
        const L xi = xv[i], b = beta, z = std::exp(L(bx));
        const bool lin = bx > threshold;
        const L want_y = lin ? xi : std::log1p(z) / b;
        const L want_dx = lin ? L(g[i]) : L(g[i]) * z / (z + 1);
        for (auto [got, want, what] : {std::tuple{y[i], want_y, "Y"}, {dx[i], want_dx, "dX"}}) {
          const bool ok = within_four_units(got, want, std::fabs(double(want)), f32);
          if (!ok) ++bad;
          EXPECT_TRUE(ok) << dt << " beta " << beta << " threshold " << threshold << " " << what
                          << " at x = " << xv[i] << ": " << got << " vs " << double(want);
        }
      }
    }
    const long double exact = std::log1p(std::exp(-30.0L));
    const double naive = f32 ? double(std::log(1.0f + std::exp(-30.0f)))
                             : std::log(1.0 + std::exp(-30.0));
    EXPECT_FALSE(within_four_units(naive, exact, double(exact), f32)) << dt;
  }
}

// binary_cross_entropy_with_logits (reduction none) takes its log-sigmoid min(x, 0) -
// log1p(exp(-|x|)) vectorised, as softplus: E = (1 - y) x - log_sigmoid(x) within 4 units in the
// last place of its terms' size of the same formula in long double, over [-120, 88] (float32) and
// [-800, 709] (float64) with targets y in [0, 1], +-inf and NaN as the formula gives them; one
// thread and two the same bits. Negative control: log(sigmoid(x)) in the dtype fails the check at
// x = -120 (float32) or -800 (float64), where sigmoid underflows.
TEST(TrainingOps, BceWithLogitsWithinFourUnitsOfTheFormula) {
  for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
    const bool f32 = dtype == Dtype::f32;
    const std::string dt = tg::dtype_name(dtype);
    const Tensor x = exp_range_grid(dtype);
    const int64_t n = x.numel();
    tg::Rng rng(19);
    const Tensor t = tg::uniform({n}, rng, 0.0, 1.0, dtype);
    const auto run = [&](int threads) {
      const tg::test::ThreadCount count(threads);
      return tg::binary_cross_entropy_with_logits(x, t, tg::Reduction::none);
    };
    const Tensor one = run(1), two = run(2);
    EXPECT_TRUE(tg::test::same_bytes(one, two)) << dt;
    const std::vector<double> e = one.to_vector(), xv = x.to_vector(), tv = t.to_vector();
    using L = long double;
    const auto log_sigmoid = [](L v) {
      return std::min(v, L(0)) - std::log1p(std::exp(-std::fabs(v)));
    };
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      const L a = (1 - L(tv[i])) * L(xv[i]), l = log_sigmoid(xv[i]), want = a - l;
      const bool ok = within_four_units(e[i], want, double(std::fabs(a) + std::fabs(l)), f32);
      if (!ok) ++bad;
      EXPECT_TRUE(ok) << dt << " at x = " << xv[i] << ", y = " << tv[i] << ": " << e[i] << " vs "
                      << double(want);
    }
    const double lo = xv.front();
    const L l = log_sigmoid(lo);
    const double naive = f32 ? double(std::log(1.0f / (1.0f + std::exp(-float(lo)))))
                             : std::log(1.0 / (1.0 + std::exp(-lo)));
    EXPECT_FALSE(within_four_units(naive, l, double(std::fabs(l)), f32)) << dt;
  }
}

TEST(TrainingOps, DivBroadcastsLikeLoops) {
  tg::Rng rng(2);
  const Tensor a = tg::randn({2, 3, 4}, rng), b = tg::uniform({3, 1}, rng, 0.5, 2.0);
  const auto av = a.to_vector(), bv = b.to_vector();
  std::vector<double> want(av.size());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[(i * 3 + j) * 4 + k] = av[(i * 3 + j) * 4 + k] / bv[j];
  expect_close(tg::div(a, b).to_vector(), want, 1e-15, "div");
  const std::vector<double> inv = tg::div(tg::scalar(1.0), b).to_vector();
  for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(inv[j], 1.0 / bv[j]);
}

TEST(TrainingOps, GeluBothModesMatchDefinitions) {
  tg::Rng rng(3);
  const Tensor x = tg::randn({4, 5}, rng, Dtype::f64, 3.0);
  const auto xv = x.to_vector();
  const double pi = std::acos(-1.0);
  expect_close(tg::gelu(x).to_vector(),
               map(xv, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }),
               1e-15, "gelu none");
  expect_close(tg::gelu(x, tg::GeluApproximate::tanh).to_vector(),
               map(xv,
                   [pi](double v) {
                     return 0.5 * v *
                            (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
                   }),
               1e-14, "gelu tanh");
  // Phi(1) = 0.8413447460685429; the tanh form differs from it in the fourth digit.
  EXPECT_NEAR(tg::gelu(tg::scalar(1.0)).item(), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(tg::gelu(tg::scalar(1.0), tg::GeluApproximate::tanh).item(), 0.8411919906082768,
              1e-15);
}

// The tanh form's backward kernel reads s = Y / X from the output (ops/gelu.cpp): its gradient
// against the derivative in long double, dY random weights, at the points where Y / X is delicate
// (0, subnormal and tiny X, where s is 1/2; X large either way, where s is 0 or 1) and at random
// X over more than one 512-entry chunk with a short tail; float32 and float64. Negative control:
// the erf form's gradient is farther off than the tolerance.
TEST(TrainingOps, GeluTanhGradientFromItsOutputMatchesTheDerivative) {
  const long double b = std::sqrt(2.0L / std::acos(-1.0L)), k = 0.044715L;
  auto derivative = [&](long double x) {
    const long double t = std::tanh(b * (x + k * x * x * x));
    return 0.5L * (1 + t) + 0.5L * x * (1 - t * t) * b * (1 + 3 * k * x * x);
  };
  std::vector<double> xs = {0.0,   -0.0,   1e-44, -1e-44, 1e-39, -1e-39, 1e-30, -1e-30, 1e-20,
                            -1e-20, 1e-8,  -1e-8, 0.5,    -0.5,  3.0,    -3.0,  9.0,   -9.0,
                            20.0,  -20.0};
  tg::Rng rng(21);
  for (double v : tg::randn({1100}, rng, Dtype::f64, 3.0).to_vector()) xs.push_back(v);
  for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
    SCOPED_TRACE(tg::dtype_name(dtype));
    const int64_t n = int64_t(xs.size());
    const Tensor x = tg::from_vector(xs, {n}, dtype).set_requires_grad();
    const Tensor dy = tg::randn({n}, rng, dtype);
    // (float32: both 1 + t and 1 - t^2 round near t = +-1, in the tanh form's kernel as here)
    const double tol = dtype == Dtype::f32 ? 1e-5 : 3e-14;
    for (const bool tanh_form : {true, false}) {
      const Tensor y = tg::gelu(x, tanh_form ? tg::GeluApproximate::tanh
                                             : tg::GeluApproximate::none);
      const auto dx = tg::grad({y}, {x}, {dy})[0].to_vector();
      const auto xv = x.to_vector(), dyv = dy.to_vector();
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = double(dyv[i] * derivative(xv[i]));
        ASSERT_TRUE(std::isfinite(dx[i])) << "x " << xv[i];
        worst = std::max(worst, std::fabs(dx[i] - want) / std::max(1.0, std::fabs(want)));
        if (tanh_form && std::fabs(xv[i]) < 1e-19) {  // s is exactly 1/2
          EXPECT_EQ(dx[i], dyv[i] * 0.5) << "x " << xv[i];
        }
      }
      if (tanh_form)
        EXPECT_LE(worst, tol);
      else
        EXPECT_GT(worst, 1e-4);  // the erf form is another function: the check sees it
    }
  }
}

// The tanh form's node keeps its output for the kernel: a write into the output before the
// backward is refused, naming gelu, not computed with the new values.
TEST(TrainingOps, GeluTanhOutputWrittenBeforeBackwardIsRefused) {
  tg::Rng rng(22);
  const Tensor x = tg::randn({3, 4}, rng).set_requires_grad();
  Tensor y = tg::gelu(x, tg::GeluApproximate::tanh);
  y.set({0, 0}, 5.0);
  try {
    tg::sum(tg::mul(y, tg::randn({3, 4}, rng))).backward();
    FAIL() << "no error";
  } catch (const tg::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("gelu"), std::string::npos) << e.what();
  }
}

TEST(TrainingOps, MeanMatchesLoops) {
  tg::Rng rng(4);
  const Tensor x = tg::randn({2, 3, 4}, rng);
  const auto v = x.to_vector();
  double all = 0;
  for (double e : v) all += e;
  EXPECT_NEAR(tg::mean(x).item(), all / 24, 1e-15);
  const Tensor m1 = tg::mean(x, 1, true);
  ASSERT_EQ(m1.shape(), (Shape{2, 1, 4}));
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double s = 0;
      for (int j = 0; j < 3; ++j) s += v[(i * 3 + j) * 4 + k];
      EXPECT_NEAR(m1.at({i, 0, k}), s / 3, 1e-15);
    }
  EXPECT_EQ(tg::mean(x, -1).shape(), (Shape{2, 3}));
  EXPECT_TRUE(std::isnan(tg::mean(tg::zeros({0, 3})).item()));
  EXPECT_TRUE(std::isnan(tg::mean(tg::zeros({0, 3}), 0).at({1})));
}

// Biased variance, the textbook way, in double.
std::vector<double> layer_norm_ref(const std::vector<double>& x, int64_t C,
                                   const std::vector<double>& w, const std::vector<double>& b,
                                   double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / C; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x[r * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (x[r * C + c] - mu) * (x[r * C + c] - mu) / C;
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = (x[r * C + c] - mu) / std::sqrt(var + eps) * (w.empty() ? 1 : w[c]) +
                     (b.empty() ? 0 : b[c]);
  }
  return y;
}

TEST(TrainingOps, LayerNormMatchesBiasedVarianceFormula) {
  tg::Rng rng(5);
  const Tensor x = tg::randn({2, 3, 6}, rng, Dtype::f64, 2.0), w = tg::randn({6}, rng),
               b = tg::randn({6}, rng);
  const auto xv = x.to_vector();
  expect_close(tg::layer_norm(x, w, b).to_vector(),
               layer_norm_ref(xv, 6, w.to_vector(), b.to_vector(), 1e-5), 1e-14, "affine");
  expect_close(tg::layer_norm(x, Tensor(), Tensor(), 0.5).to_vector(),
               layer_norm_ref(xv, 6, {}, {}, 0.5), 1e-14, "plain eps 0.5");
  // A constant row: var = 0, so the output is the bias.
  expect_close(tg::layer_norm(tg::full({1, 6}, 3.0), w, b).to_vector(), b.to_vector(), 0,
               "constant");
}

// linear's entries outside their tolerance against loops in double: Y = X W^T + b, and with
// R the upstream gradient dX = R W, dW = R^T X, db = R's column sums (when the gradients are
// given). Each entry's tolerance is 1e-6 of its terms' magnitudes plus one: a few float32
// roundings.
int64_t linear_misses(const Tensor& x, const Tensor& w, const std::vector<double>& B,
                      const Tensor& r, const Tensor& y, const Tensor& gx, const Tensor& gw,
                      const Tensor& gb) {
  const int64_t rows = x.size(0), in = x.size(1), out = w.size(0);
  const auto X = x.to_vector(), W = w.to_vector(), R = r.to_vector(), Y = y.to_vector();
  std::vector<double> dx(rows * in, 0), dx_mag(rows * in, 0), dw(out * in, 0), dw_mag(out * in, 0),
      db(out, 0);
  int64_t misses = 0;
  auto miss = [&](double got, double want, double mag) {
    misses += !(std::fabs(got - want) <= 1e-6 * (mag + 1));
  };
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double want = B[o], mag = std::fabs(B[o]);
      const double g = R[i * out + o];
      for (int64_t k = 0; k < in; ++k) {
        want += X[i * in + k] * W[o * in + k];
        mag += std::fabs(X[i * in + k] * W[o * in + k]);
        dx[i * in + k] += g * W[o * in + k];
        dx_mag[i * in + k] += std::fabs(g * W[o * in + k]);
        dw[o * in + k] += g * X[i * in + k];
        dw_mag[o * in + k] += std::fabs(g * X[i * in + k]);
      }
      db[o] += g;
      miss(Y[i * out + o], want, mag);
    }
  if (gx.defined()) {
    const auto G = gx.to_vector();
    for (std::size_t j = 0; j < dx.size(); ++j) miss(G[j], dx[j], dx_mag[j]);
  }
  if (gw.defined()) {
    const auto G = gw.to_vector();
    for (std::size_t j = 0; j < dw.size(); ++j) miss(G[j], dw[j], dw_mag[j]);
  }
  if (gb.defined()) {
    const auto G = gb.to_vector();
    for (int64_t o = 0; o < out; ++o) miss(G[o], db[o], static_cast<double>(rows));
  }
  return misses;
}

// linear in float32 at sizes that take each of gemm's routes (the panel kernel starting its sums
// from the bias where the CPU has AVX-512: one inner block, several (an inner size over 256, the
// bias only the first's start), columns past the last whole panel; BLIS with beta 1, Eigen's small
// product, the tiny product, a single row), with and without a bias, values and gradients.
TEST(TrainingOps, LinearMatchesLoopsOnEveryProductRoute) {
  struct Case {
    int64_t rows, in, out;
  };
  for (const Case c : {Case{768, 128, 384}, Case{64, 300, 100}, Case{768, 600, 200},
                       Case{64, 70, 600}, Case{40, 30, 20}, Case{2, 3, 4}, Case{1, 200, 300}}) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + " -> " +
                   std::to_string(c.out) + (with_bias ? ", bias" : ", no bias"));
      tg::Rng rng(c.rows + c.out);
      Tensor x = tg::randn({c.rows, c.in}, rng, Dtype::f32).set_requires_grad();
      Tensor w = tg::randn({c.out, c.in}, rng, Dtype::f32).set_requires_grad();
      Tensor b = with_bias ? tg::randn({c.out}, rng, Dtype::f32, 4.0).set_requires_grad()
                           : Tensor();
      const Tensor r = tg::randn({c.rows, c.out}, rng, Dtype::f32);  // the upstream gradient
      const Tensor y = tg::linear(x, w, b);
      tg::sum(tg::mul(y, r)).backward();
      const auto B = with_bias ? b.to_vector() : std::vector<double>(c.out, 0.0);
      EXPECT_EQ(linear_misses(x, w, B, r, y, x.grad(), w.grad(), with_bias ? b.grad() : Tensor()),
                0);
    }
  }
}

// Empty sizes, as PyTorch: no inputs (in = 0) give the bias on every row, no outputs (out = 0) an
// empty Y and zero gradients; no rows give zero dW and db. Both the kernels and the formulas
// (create_graph) run.
TEST(TrainingOps, LinearOfEmptySizes) {
  struct Case {
    int64_t rows, in, out;
  };
  for (const bool create_graph : {false, true}) {
    for (const Case c : {Case{4, 0, 5}, Case{3, 2, 0}, Case{0, 3, 2}}) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.in) + " -> " +
                   std::to_string(c.out) + (create_graph ? ", create_graph" : ""));
      tg::Rng rng(7);
      Tensor x = tg::randn({c.rows, c.in}, rng).set_requires_grad();
      Tensor w = tg::randn({c.out, c.in}, rng).set_requires_grad();
      Tensor b = tg::randn({c.out}, rng).set_requires_grad();
      const Tensor y = tg::linear(x, w, b);
      ASSERT_EQ(y.shape(), (Shape{c.rows, c.out}));
      const auto Y = y.to_vector(), B = b.to_vector();
      if (c.in == 0) {  // the other cases' Y is empty
        for (int64_t i = 0; i < c.rows; ++i)
          for (int64_t o = 0; o < c.out; ++o) EXPECT_EQ(Y[i * c.out + o], B[o]);
      }
      const Tensor r = tg::randn({c.rows, c.out}, rng);
      // tg::grad, not backward: create_graph's gradients kept in .grad() would hold their own
      // graph, and with it the leaves (a cycle)
      const std::vector<Tensor> g = tg::grad({tg::sum(tg::mul(y, r))}, {x, w, b}, {}, create_graph);
      for (const double v : g[0].to_vector()) EXPECT_EQ(v, 0.0);  // out = 0 (else empty)
      for (const double v : g[1].to_vector()) EXPECT_EQ(v, 0.0);  // rows = 0 (else empty)
      const auto R = r.to_vector(), db = g[2].to_vector();
      for (int64_t o = 0; o < c.out; ++o) {
        double want = 0;
        for (int64_t i = 0; i < c.rows; ++i) want += R[i * c.out + o];
        EXPECT_NEAR(db[o], want, 1e-12);
      }
    }
  }
}

// Negative control for the test above: its tolerance sees a bias left out or added twice.
TEST(TrainingOps, LinearLoopCheckSeesAWrongBias) {
  tg::Rng rng(3);
  const Tensor x = tg::randn({768, 128}, rng, Dtype::f32);
  const Tensor w = tg::randn({384, 128}, rng, Dtype::f32);
  const Tensor b = tg::randn({384}, rng, Dtype::f32, 4.0), r = tg::zeros({768, 384}, Dtype::f32);
  const auto B = b.to_vector();
  EXPECT_EQ(linear_misses(x, w, B, r, tg::linear(x, w, b), {}, {}, {}), 0);
  EXPECT_GT(linear_misses(x, w, B, r, tg::linear(x, w), {}, {}, {}), 768 * 384 * 9 / 10);
  const Tensor twice = tg::add(tg::linear(x, w, b), b);
  EXPECT_GT(linear_misses(x, w, B, r, twice, {}, {}, {}), 768 * 384 * 9 / 10);
}

TEST(TrainingOps, LogSoftmaxMatchesLoopsAndMasks) {
  const Tensor x = tg::from_vector({1, 2, -kInf, 0.5,            //
                                    -kInf, -kInf, -kInf, -kInf,  // fully masked
                                    1e4, 1e4 - 1, -1e4, 3},
                                   {3, 4});
  const auto v = x.to_vector();
  std::vector<double> want(12);
  for (int r = 0; r < 3; ++r) {
    double mx = -kInf, s = 0;
    for (int j = 0; j < 4; ++j) mx = std::max(mx, v[r * 4 + j]);
    for (int j = 0; j < 4; ++j) s += v[r * 4 + j] == -kInf ? 0 : std::exp(v[r * 4 + j] - mx);
    for (int j = 0; j < 4; ++j)
      want[r * 4 + j] = mx == -kInf ? -kInf : v[r * 4 + j] - mx - std::log(s);
  }
  const Tensor y = tg::log_softmax(x);
  expect_close(y.to_vector(), want, 1e-15, "log_softmax");
  EXPECT_EQ(y.at({0, 2}), -kInf);
  EXPECT_EQ(y.at({1, 0}), -kInf);
  // The masked row gets zero gradient, through the kernel and through the formula.
  for (bool create_graph : {false, true}) {
    const Tensor xr = x.detach().clone().set_requires_grad();
    const Tensor dy = tg::from_vector({1, -2, 3, 0.5, 4, 5, -6, 7, 0.1, 0.2, 0.3, 0.4}, {3, 4});
    const auto g = tg::grad({tg::log_softmax(xr)}, {xr}, {dy}, create_graph)[0].to_vector();
    for (int j = 0; j < 4; ++j) EXPECT_EQ(g[4 + j], 0.0) << "create_graph " << create_graph;
    for (double e : g) EXPECT_TRUE(std::isfinite(e));
  }
}

// Gradients of `outputs` weighted by fixed random grad_outputs: kernels (create_graph false) or
// formulas (create_graph true).
std::vector<Tensor> grads_of(const tg::OpCase& c, bool create_graph) {
  std::vector<Tensor> xs;
  for (const Tensor& x : c.inputs) xs.push_back(x.detach().clone().set_requires_grad());
  const std::vector<Tensor> ys = c.fn(xs);
  std::vector<Tensor> ws;
  tg::Rng rng(7);
  for (const Tensor& y : ys) ws.push_back(tg::randn(y.shape(), rng));
  return tg::grad(ys, xs, ws, create_graph);
}

// Largest |a - b| / max(1, max |b|) over all entries.
double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto av = a[i].to_vector(), bv = b[i].to_vector();
    double scale = 1;
    for (double v : bv) scale = std::max(scale, std::fabs(v));
    for (std::size_t k = 0; k < av.size(); ++k)
      worst = std::max(worst, std::fabs(av[k] - bv[k]) / scale);
  }
  return worst;
}

const std::set<std::string> kTrainingOps = {"div",  "exp",   "log",        "tanh",
                                            "sqrt", "rsqrt", "relu",       "gelu",
                                            "erf",  "mean",  "layer_norm", "log_softmax"};

TEST(TrainingOps, KernelsAgreeWithFormulasOnEveryCase) {
  int cases = 0;
  for (const tg::OpCase& c : tg::op_cases()) {
    if (!kTrainingOps.count(c.op)) continue;
    SCOPED_TRACE(c.name + " on " + c.shapes());
    ++cases;
    EXPECT_LE(max_rel_diff(grads_of(c, false), grads_of(c, true)), 1e-12);
  }
  EXPECT_GE(cases, 80);
}

TEST(TrainingOps, KernelAgreementCheckCanFail) {
  // Negative control: the two gelu modes differ by about 1e-3, which the comparison must see.
  tg::OpCase none, approx;
  tg::Rng rng(8);
  none.inputs = approx.inputs = {tg::randn({3, 4}, rng)};
  none.fn = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{tg::gelu(x[0])}; };
  approx.fn = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{tg::gelu(x[0], tg::GeluApproximate::tanh)};
  };
  EXPECT_GT(max_rel_diff(grads_of(none, false), grads_of(approx, true)), 1e-5);
}

TEST(TrainingOps, LayerNormKernelHandlesEachMissingAffine) {
  tg::Rng rng(9);
  const Tensor x = tg::randn({3, 5}, rng), w = tg::randn({5}, rng), b = tg::randn({5}, rng);
  for (int mask = 0; mask < 4; ++mask) {
    SCOPED_TRACE("weight " + std::to_string(mask & 1) + " bias " + std::to_string(mask >> 1));
    tg::OpCase c;
    c.inputs = {x, w, b};
    c.fn = [mask](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{
          tg::layer_norm(in[0], mask & 1 ? in[1] : Tensor(), mask & 2 ? in[2] : Tensor())};
    };
    const auto k = grads_of(c, false), f = grads_of(c, true);
    EXPECT_LE(max_rel_diff(k, f), 1e-12);
    // A weight or bias the op did not use gets zeros.
    if (!(mask & 1)) {
      EXPECT_EQ(tg::sum_of_squares(k[1]).item(), 0.0);
    }
    if (!(mask & 2)) {
      EXPECT_EQ(tg::sum_of_squares(k[2]).item(), 0.0);
    }
  }
}

TEST(TrainingOps, Float32MeanOfManyOnesIsExact) {
  const Tensor ones = tg::ones({20000000}, Dtype::f32);
  EXPECT_EQ(tg::mean(ones).item(), 1.0);
  EXPECT_EQ(tg::mean(tg::ones({10000000, 2}, Dtype::f32), 0).at({1}), 1.0);
  const Tensor tenths = tg::full({20000000}, 0.1, Dtype::f32);
  EXPECT_NEAR(tg::mean(tenths).item(), double(0.1f), 1e-9);
}

TEST(TrainingOps, Float32LayerNormOfOffsetRowsIsAccurate) {
  // Rows around 1e4 with unit spread: a float32 one-pass variance would lose every digit.
  tg::Rng rng(10);
  const Tensor x64 = tg::add(tg::randn({4, 256}, rng), tg::scalar(1e4));
  const Tensor x32 = x64.to(Dtype::f32);
  const auto want = tg::layer_norm(x32.to(Dtype::f64), Tensor(), Tensor()).to_vector();
  expect_close(tg::layer_norm(x32, Tensor(), Tensor()).to_vector(), want, 1e-5, "float32");
}

// float32 layer_norm runs its rows' sums in float32 by 16 lanes with a tail, folded into double
// every 1,024 entries (ops/layer_norm.cpp): widths below, at and around the lanes and the folds,
// rows offset by 1e4 and not; forward and every gradient against float64 on the same float32
// values, dY random weights. Negative control: the gradients of the rows in the other order do
// not match.
TEST(TrainingOps, Float32LayerNormMatchesFloat64AtEveryWidth) {
  for (const int64_t C : {1, 5, 16, 17, 48, 128, 131, 1024, 1040, 2100}) {
    for (const double offset : {0.0, 1e4}) {
      tg::Rng rng(uint64_t(C) * 7 + (offset != 0));
      const auto f32 = [&](const Tensor& t) { return t.to(Dtype::f32); };
      const Tensor x = f32(tg::add(tg::randn({9, C}, rng), tg::scalar(offset)));
      const Tensor w = f32(tg::randn({C}, rng)), b = f32(tg::randn({C}, rng));
      const Tensor dy = f32(tg::randn({9, C}, rng));
      auto run = [&](Dtype dtype, const Tensor& dy_rows) {
        const Tensor xd = x.to(dtype).set_requires_grad(), wd = w.to(dtype).set_requires_grad(),
                     bd = b.to(dtype).set_requires_grad();
        const Tensor y = tg::layer_norm(xd, wd, bd);
        std::vector<std::vector<double>> out = {y.to_vector()};
        for (const Tensor& g : tg::grad({y}, {xd, wd, bd}, {dy_rows.to(dtype)}))
          out.push_back(g.to_vector());
        return out;
      };
      const auto got = run(Dtype::f32, dy), want = run(Dtype::f64, dy);
      const std::string what = "C " + std::to_string(C) + " offset " + std::to_string(offset);
      const char* names[] = {"Y", "dX", "dW", "dB"};
      for (int i = 0; i < 4; ++i) expect_close(got[i], want[i], 2e-5, what + " " + names[i]);
      if (C == 1) continue;  // dX is 0 and dW's sum is the same whatever the rows' order
      std::vector<double> rows = dy.to_vector(), flipped_rows;
      for (int64_t r = 8; r >= 0; --r)
        flipped_rows.insert(flipped_rows.end(), rows.begin() + r * C, rows.begin() + (r + 1) * C);
      const Tensor flipped = tg::from_vector(flipped_rows, {9, C}, Dtype::f32);
      const auto other = run(Dtype::f64, flipped);
      double dx_gap = 0, dw_gap = 0;
      for (std::size_t i = 0; i < got[1].size(); ++i)
        dx_gap = std::max(dx_gap, std::fabs(got[1][i] - other[1][i]));
      for (std::size_t i = 0; i < got[2].size(); ++i)
        dw_gap = std::max(dw_gap, std::fabs(got[2][i] - other[2][i]));
      EXPECT_GT(dx_gap, 1e-2) << what;
      EXPECT_GT(dw_gap, 1e-2) << what;
    }
  }
}

// float32 layer_norm with a row's first entry an outlier (a large fixed channel, as transformer
// residual streams have): the mean is taken as the mean in float32 plus the mean of the entries
// less it, not around any one entry, so the ordinary entries' Xhat keeps float32's precision
// (centred on the first entry they lost a digit or more). Against float64 on the same values.
TEST(TrainingOps, Float32LayerNormWithAnOutlierFirstEntryIsAccurate) {
  for (const double outlier : {100.0, 1000.0, 2e4}) {
    const double offset = outlier > 1e4 ? 1e4 : 0.0;
    tg::Rng rng{uint64_t(outlier)};
    std::vector<double> xv = tg::randn({4, 768}, rng).to_vector();
    for (double& v : xv) v += offset;
    for (int r = 0; r < 4; ++r) xv[r * 768] = outlier;
    const Tensor x32 = tg::from_vector(xv, {4, 768}, Dtype::f32);
    const auto got = tg::layer_norm(x32, Tensor(), Tensor()).to_vector();
    const auto want = tg::layer_norm(x32.to(Dtype::f64), Tensor(), Tensor()).to_vector();
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (i % 768 != 0) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LE(worst, 5e-7) << "outlier " << outlier;
  }
}

// Entries too large for a float32 row's sums (their sum and their squares pass float's range):
// those run in double, so Y matches float64 (the first pass's overflow made every entry NaN, the
// squares' made Y all 0); and a row of equal huge entries gives Y = B.
TEST(TrainingOps, Float32LayerNormOfHugeEntriesStaysFinite) {
  tg::Rng rng(23);
  std::vector<double> xv = tg::randn({2, 64}, rng).to_vector();
  for (double& v : xv) v = 1e37 * (2 + v / 8);  // all positive, about 2e37
  const Tensor x32 = tg::from_vector(xv, {2, 64}, Dtype::f32);
  const auto got = tg::layer_norm(x32, Tensor(), Tensor()).to_vector();
  const auto want = tg::layer_norm(x32.to(Dtype::f64), Tensor(), Tensor()).to_vector();
  for (double v : got) ASSERT_TRUE(std::isfinite(v));
  expect_close(got, want, 1e-5, "huge");
  const Tensor b = tg::randn({64}, rng, Dtype::f32);
  expect_close(tg::layer_norm(tg::full({2, 64}, 3e37, Dtype::f32), Tensor(), b).to_vector(),
               tg::cat({b, b}, 0).to_vector(), 0, "equal huge entries");
}

struct BadInput {
  const char* name;
  std::function<void()> call;
  enum Kind { shape, value } kind;
  const char* fragment;
};

TEST(TrainingOps, BadInputsThrowNamingTheOp) {
  const Tensor a = tg::zeros({2, 3}), a32 = tg::zeros({2, 3}, Dtype::f32);
  const Tensor idx = tg::from_indices({0, 1, 2}, {3});
  const BadInput rows[] = {
      {"div dtypes", [&] { tg::div(a, a32); }, BadInput::value, "div: dtypes differ"},
      {"div broadcast", [&] { tg::div(a, tg::ones({4})); }, BadInput::shape,
       "div: shapes do not broadcast: (2, 3) and (4,)"},
      {"div int64", [&] { tg::div(idx, idx); }, BadInput::value, "div: needs a float32 or float64"},
      {"exp int64", [&] { tg::exp(idx); }, BadInput::value,
       "exp: needs a float32 or float64 tensor, got int64"},
      {"log undefined", [&] { tg::log(Tensor()); }, BadInput::value, "log: input is an undefined"},
      {"gelu int64", [&] { tg::gelu(idx); }, BadInput::value, "gelu: needs a float32"},
      {"relu int64", [&] { tg::relu(idx); }, BadInput::value, "relu: needs a float32"},
      {"rsqrt int64", [&] { tg::rsqrt(idx); }, BadInput::value, "rsqrt: needs a float32"},
      {"mean axis 2", [&] { tg::mean(a, 2); }, BadInput::shape,
       "mean: axis 2 is out of range for shape (2, 3)"},
      {"mean axis -3", [&] { tg::mean(a, -3, true); }, BadInput::shape, "mean: axis -3"},
      {"mean int64", [&] { tg::mean(idx); }, BadInput::value, "mean: needs a float32"},
      {"layer_norm weight shape", [&] { tg::layer_norm(a, tg::ones({2}), Tensor()); },
       BadInput::shape, "layer_norm: weight (2,) must be (C,) = (3,) for input (2, 3)"},
      {"layer_norm bias shape",
       [&] {
         tg::layer_norm(a, Tensor(), tg::ones({1, 3}));
       },
       BadInput::shape, "layer_norm: bias (1, 3)"},
      {"layer_norm weight dtype", [&] { tg::layer_norm(a, tg::ones({3}, Dtype::f32), Tensor()); },
       BadInput::value, "layer_norm: weight (3,) float32 and input (2, 3) float64: dtypes differ"},
      {"layer_norm eps", [&] { tg::layer_norm(a, Tensor(), Tensor(), -1.0); }, BadInput::value,
       "layer_norm: eps must be >= 0"},
      {"layer_norm rank 0", [&] { tg::layer_norm(tg::scalar(1.0), Tensor(), Tensor()); },
       BadInput::shape, "layer_norm: needs rank 1"},
      {"layer_norm int64", [&] { tg::layer_norm(idx, Tensor(), Tensor()); }, BadInput::value,
       "layer_norm: needs a float32"},
      {"log_softmax rank 0", [&] { tg::log_softmax(tg::scalar(1.0)); }, BadInput::shape,
       "log_softmax: needs rank 1"},
      {"log_softmax int64", [&] { tg::log_softmax(idx); }, BadInput::value,
       "log_softmax: needs a float32"},
  };
  for (const BadInput& row : rows) {
    SCOPED_TRACE(row.name);
    if (row.kind == BadInput::shape)
      tg::test::expect_throws<tg::ShapeError>(row.call, {row.fragment});
    else
      tg::test::expect_throws<tg::ValueError>(row.call, {row.fragment});
  }
}

}  // namespace
