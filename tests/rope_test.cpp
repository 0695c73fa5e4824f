// Rotary position embeddings (tg::rope): what RoPE promises (position 0 unchanged, norms kept,
// scores that depend on relative position only) and the formula, written as loops.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <tapegrad/ops/ops.h>
#include "attention_util.h"

namespace {

using tg::Tensor;
using tg::test::expect_close;
using tg::test::rope_loops;
using Vec = std::vector<double>;

TEST(Rope, PositionZeroIsIdentityAndPairNormsArePreserved) {
  tg::Rng rng(5);
  const Tensor x = tg::randn({2, 3, 7, 6}, rng);
  const Vec a = x.to_vector(), b = tg::rope(x).to_vector();
  for (int64_t row = 0; row < 2 * 3 * 7; ++row)
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t k = row * 6 + 2 * i;
      if (row % 7 == 0) {
        EXPECT_TRUE(b[k] == a[k] && b[k + 1] == a[k + 1]) << "row " << row;
      }
      EXPECT_NEAR(std::hypot(b[k], b[k + 1]), std::hypot(a[k], a[k + 1]), 1e-14);
    }
}

TEST(Rope, MatchesFormulaAndInverseUndoesIt) {
  tg::Rng rng(6);
  for (double base : {10000.0, 100.0, 2.5}) {
    SCOPED_TRACE("base " + std::to_string(base));
    const Tensor x = tg::randn({3, 5, 4}, rng);
    Vec want = x.to_vector();
    for (int64_t b = 0; b < 3; ++b) {
      Vec m(want.begin() + b * 20, want.begin() + (b + 1) * 20);
      rope_loops(m, 5, 4, base);
      std::copy(m.begin(), m.end(), want.begin() + b * 20);
    }
    const Tensor y = tg::rope(x, base);
    expect_close(y.to_vector(), want, 1e-15, "rope");
    expect_close(tg::rope(y, base, true).to_vector(), x.to_vector(), 1e-14, "inverse");
  }
  // Hand-computed: d_h = 4, base 100, position 2: pair 0 turns by 2 rad, pair 1 by 2/10 rad.
  Vec e(12, 0.0);
  e[8] = 1, e[10] = 1;  // row 2 = (1, 0, 1, 0)
  const Vec y = tg::rope(tg::from_vector(e, {3, 4}), 100.0).to_vector();
  EXPECT_NEAR(y[8], std::cos(2.0), 1e-15);
  EXPECT_NEAR(y[9], std::sin(2.0), 1e-15);
  EXPECT_NEAR(y[10], std::cos(0.2), 1e-15);
  EXPECT_NEAR(y[11], std::sin(0.2), 1e-15);
}

// <rope(q)_m, rope(k)_n> depends on m - n only: the same q and k placed at shifted positions.
TEST(Rope, ScoreDependsOnlyOnRelativePosition) {
  tg::Rng rng(8);
  const Vec q = tg::randn({8}, rng).to_vector(), k = tg::randn({8}, rng).to_vector();
  auto score = [&](int64_t m, int64_t n, double base) {
    Vec Q(10 * 8, 0.0), K(10 * 8, 0.0);
    std::copy(q.begin(), q.end(), Q.begin() + m * 8);
    std::copy(k.begin(), k.end(), K.begin() + n * 8);
    const Vec rq = tg::rope(tg::from_vector(Q, {10, 8}), base).to_vector();
    const Vec rk = tg::rope(tg::from_vector(K, {10, 8}), base).to_vector();
    double s = 0;
    for (int64_t e = 0; e < 8; ++e) s += rq[m * 8 + e] * rk[n * 8 + e];
    return s;
  };
  for (double base : {10000.0, 10.0}) {
    SCOPED_TRACE("base " + std::to_string(base));
    double qk = 0;
    for (int e = 0; e < 8; ++e) qk += q[e] * k[e];
    for (int64_t m : {0, 4, 9}) EXPECT_NEAR(score(m, m, base), qk, 1e-12);
    for (int64_t s : {1, 3}) EXPECT_NEAR(score(s + 2, 2, base), score(s + 6, 6, base), 1e-12);
    EXPECT_NEAR(score(1, 4, base), score(5, 8, base), 1e-12);
    EXPECT_GT(std::fabs(score(3, 2, base) - score(4, 2, base)), 1e-3);  // the offset matters
  }
}

}  // namespace
