// The matrix-multiply kernel every op uses (ops/gemm.h) and the panel product it sends a model's
// layer-sized products to (ops/panel_gemm.cpp), against sums in long double: every layout
// (A and B each transposed or not), views whose rows are longer than their columns, Y
// overwritten (beta 0, NaN in it beforehand) or added to (beta 1), sizes across the panel's
// edges (columns left over for gemm, rows left over from a block or a tile of 8, inner sizes
// across the 256 a pass takes), and the same bits from one thread and two.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/threads.h>
#include "test_util.h"

namespace {

using tg::detail::MatrixView;

struct Case {
  int64_t M, K, N;
  bool ta, tb;
  int64_t pad = 0;  // extra entries at the end of every row of A, B and Y
};

std::string name(const Case& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.K) + "x" + std::to_string(c.N) +
         (c.ta ? " A^T" : "") + (c.tb ? " B^T" : "") + (c.pad ? " padded" : "");
}

// op(A) (M, K), op(B) (K, N) and Y (M, N) in buffers of the case's layout, filled with normal
// entries (Y with `y0`).
template <class T>
struct Operands {
  Case c;
  std::vector<T> a, b, y;
  int64_t lda, ldb, ldy;

  Operands(const Case& c_, uint64_t seed, T y0) : c(c_) {
    const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
    const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
    lda = a_cols + c.pad, ldb = b_cols + c.pad, ldy = c.N + c.pad;
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> normal;
    a.resize(a_rows * lda);
    b.resize(b_rows * ldb);
    for (T& v : a) v = T(normal(gen));
    for (T& v : b) v = T(normal(gen));
    y.assign(c.M * ldy, y0);
  }
  MatrixView<const T> A() const {
    return {a.data(), c.ta ? c.K : c.M, c.ta ? c.M : c.K, lda, c.ta};
  }
  MatrixView<const T> B() const {
    return {b.data(), c.tb ? c.N : c.K, c.tb ? c.K : c.N, ldb, c.tb};
  }
  MatrixView<T> Y() { return {y.data(), c.M, c.N, ldy}; }
  T at_a(int64_t i, int64_t k) const { return c.ta ? a[k * lda + i] : a[i * lda + k]; }
  T at_b(int64_t k, int64_t j) const { return c.tb ? b[j * ldb + k] : b[k * ldb + j]; }
};

// Y (beta 0) or Y + op(A) op(B) (beta 1) against the sum in long double, to within 8 sqrt(K + 1)
// roundings of the terms' magnitudes (a sum in order errs by about sqrt(K) roundings of its
// partial sums; one term dropped or doubled is about 1 / K of the magnitudes, far more); the
// padding entries untouched.
template <class T>
void expect_product(const Operands<T>& before, const Operands<T>& after, bool accumulate) {
  const Case& c = before.c;
  const double eps = std::numeric_limits<T>::epsilon();
  int bad = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      long double sum = accumulate ? before.y[i * before.ldy + j] : 0.0L;
      long double magnitude = std::abs(sum);
      for (int64_t k = 0; k < c.K; ++k) {
        const long double p = (long double)before.at_a(i, k) * before.at_b(k, j);
        sum += p;
        magnitude += std::abs(p);
      }
      const double got = after.y[i * after.ldy + j];
      const double tol = 8 * eps * std::sqrt(double(c.K + 1)) * double(magnitude);
      if (!(std::abs(got - double(sum)) <= tol) && ++bad <= 3)
        ADD_FAILURE() << name(c) << ": Y(" << i << ", " << j << ") = " << got << ", expected "
                      << double(sum) << " (tolerance " << tol << ")";
    }
    for (int64_t j = c.N; j < c.N + c.pad; ++j) {
      const T was = before.y[i * before.ldy + j], is = after.y[i * after.ldy + j];
      if (!(is == was || (std::isnan(is) && std::isnan(was))) && ++bad <= 3)
        ADD_FAILURE() << name(c) << ": padding entry (" << i << ", " << j << ") written";
    }
  }
  EXPECT_EQ(bad, 0) << name(c);
}

// Sizes around the panel product's edges: panels of 32 floats or 16 doubles with AVX-512 (16 or
// 8 with AVX2), tiles of 8 rows (4), blocks of 96 rows, passes of 256 inner entries; and the
// layer-sized products it is there for.
std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t sizes[][3] = {{8, 9, 32},    {9, 33, 33},   {13, 17, 47},  {97, 255, 64},
                              {96, 256, 65}, {100, 257, 100}, {31, 600, 96}, {64, 32, 64},
                              {193, 128, 128}, {64, 64, 512}, {8, 1000, 40}};
  for (const auto& s : sizes)
    for (int layout = 0; layout < 4; ++layout)
      out.push_back({s[0], s[1], s[2], (layout & 1) != 0, (layout & 2) != 0});
  for (int layout = 0; layout < 4; ++layout)  // an empty sum: Y = 0 (or Y unchanged)
    out.push_back({16, 0, 40, (layout & 1) != 0, (layout & 2) != 0});
  out.push_back({37, 70, 80, true, true, 5});
  out.push_back({37, 70, 80, false, false, 3});
  out.push_back({40, 50, 70, false, true, 7});
  // B's rows 4 KiB apart (1024 floats, 512 doubles): panel_gemm computes these too (gemm sends
  // them elsewhere, for their width alone in these cases)
  out.push_back({24, 40, 1024, false, false});
  out.push_back({24, 40, 512, true, false});
  return out;
}

template <class T>
void check_all(bool panel_directly) {
  uint64_t seed = 1;
  for (const Case& c : cases()) {
    for (const bool accumulate : {false, true}) {
      const T y0 = accumulate ? T(0.5) : std::numeric_limits<T>::quiet_NaN();
      const Operands<T> before(c, seed++, y0);
      Operands<T> after = before;
      if (accumulate) {  // Y's own entries, to be added to
        std::mt19937_64 gen(seed++);
        std::normal_distribution<double> normal;
        for (int64_t i = 0; i < c.M; ++i)
          for (int64_t j = 0; j < c.N; ++j) after.y[i * after.ldy + j] = T(normal(gen));
      }
      Operands<T> expected_from = after;
      if (panel_directly)
        tg::detail::panel_gemm<T>(after.A(), after.B(), after.Y(), accumulate);
      else
        tg::detail::gemm<T>(after.A(), after.B(), after.Y(), T(1), accumulate ? T(1) : T(0));
      SCOPED_TRACE(name(c) + (accumulate ? ", Y +=" : ", Y ="));
      expect_product(expected_from, after, accumulate);
    }
  }
}

TEST(Gemm, EveryLayoutAndEdgeAgreesWithLongDoubleFloat) { check_all<float>(false); }
TEST(Gemm, EveryLayoutAndEdgeAgreesWithLongDoubleDouble) { check_all<double>(false); }
TEST(PanelGemm, EveryLayoutAndEdgeAgreesWithLongDoubleFloat) { check_all<float>(true); }
TEST(PanelGemm, EveryLayoutAndEdgeAgreesWithLongDoubleDouble) { check_all<double>(true); }

TEST(Gemm, AnAlphaAndBetaOtherThanOneAndZero) {
  // (alpha 2, beta 0.5: a route the panel product does not take, BLIS or Eigen)
  const Case c{96, 128, 128, false, true};
  const Operands<float> before(c, 7, 1.0f);
  Operands<float> after = before;
  tg::detail::gemm<float>(after.A(), after.B(), after.Y(), 2.0f, 0.5f);
  Operands<float> product = before;  // (Y - 0.5) / 2 = A B
  for (size_t i = 0; i < product.y.size(); ++i) product.y[i] = (after.y[i] - 0.5f) / 2.0f;
  expect_product(before, product, false);
}

// alpha with beta 0, which the panel route takes (gemm scales Y after the kernel; the attention's
// scores, Q K^T scale): every layout, a last partial panel, rows padded, Y NaN before (never
// read). alpha is a power of two, so Y / alpha is the product exactly; ignoring alpha would be 8
// times off.
template <class T>
void check_alpha_beta_zero() {
  const T alpha = T(0.125);
  uint64_t seed = 40;
  for (const Case& shape : {Case{64, 32, 47, false, false, 3}, Case{200, 64, 100, false, false, 2},
                            Case{96, 128, 128, false, false}})
    for (int layout = 0; layout < 4; ++layout) {
      Case c = shape;
      c.ta = (layout & 1) != 0, c.tb = (layout & 2) != 0;
      const Operands<T> before(c, seed++, std::numeric_limits<T>::quiet_NaN());
      Operands<T> after = before;
      tg::detail::gemm<T>(after.A(), after.B(), after.Y(), alpha, T(0));
      Operands<T> product = after;
      for (T& v : product.y) v /= alpha;
      SCOPED_TRACE(name(c) + ", alpha 0.125");
      expect_product(before, product, false);
    }
}
TEST(Gemm, AnAlphaWithBetaZeroFloat) { check_alpha_beta_zero<float>(); }
TEST(Gemm, AnAlphaWithBetaZeroDouble) { check_alpha_beta_zero<double>(); }

// The layer-sized products (768 rows, as the GPT step's Linears) give the same bits from a team
// of one and of two: the threads share rows, never an entry's sum. (At two threads 200 rows go
// as 96 and 104, a block of 96 and one of 8 after it; 65 rows as 32 and 33, the last tile one
// row; 512 rows as 256 each, in blocks of 96, 96 and 64.)
TEST(PanelGemm, SameBitsFromOneThreadAndTwo) {
  for (const Case& c : {Case{768, 128, 384, false, true}, Case{384, 768, 128, true, false},
                        Case{768, 512, 100, false, false}, Case{200, 700, 128, true, false},
                        Case{65, 768, 128, true, false}, Case{512, 768, 128, true, false}}) {
    const Operands<float> start(c, 11, 0.0f);
    Operands<float> one = start, two = start;
    {
      tg::test::ThreadCount team(1);
      tg::detail::gemm<float>(one.A(), one.B(), one.Y());
    }
    {
      tg::test::ThreadCount team(2);
      tg::detail::gemm<float>(two.A(), two.B(), two.Y());
    }
    EXPECT_EQ(one.y, two.y) << name(c);
    expect_product(start, two, false);
  }
}

}  // namespace
