// The tape's own machinery: backward closures (stored in the node, or in a pooled block when
// large), their release after a backward, and the engine's per-pass bookkeeping, which a
// backward run from inside another backward's closure must leave intact.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tapegrad.h"

namespace {

using tg::Grads;
using tg::Tensor;

// A closure of `Pad` extra bytes that holds `token`, so tests can count the live copies.
template <int Pad>
struct Holder {
  std::shared_ptr<int> token;
  char pad[Pad] = {};
  Grads operator()(const Tensor& dY, const Tensor&) const { return {tg::scale(dY, *token)}; }
};

template <int Pad>
void check_lifetime() {
  auto token = std::make_shared<int>(3);
  tg::BackwardFn f(Holder<Pad>{token});
  EXPECT_EQ(token.use_count(), 2);
  tg::BackwardFn g(std::move(f));
  EXPECT_FALSE(static_cast<bool>(f));
  ASSERT_TRUE(static_cast<bool>(g));
  EXPECT_EQ(token.use_count(), 2);  // moved, not copied
  const Grads out = g(tg::from_vector({1.0, -2.0}, {2}), Tensor());
  EXPECT_EQ(out[0].to_vector(), (std::vector<double>{3.0, -6.0}));
  tg::BackwardFn h;
  h = std::move(g);
  EXPECT_EQ(token.use_count(), 2);
  h.reset();
  EXPECT_FALSE(static_cast<bool>(h));
  EXPECT_EQ(token.use_count(), 1);  // destroyed exactly once
}

TEST(BackwardFn, SmallClosureLivesInPlaceAndDiesOnce) {
  static_assert(sizeof(Holder<8>) <= tg::BackwardFn::kInline);
  check_lifetime<8>();
}

TEST(BackwardFn, LargeClosureLivesInAPooledBlockAndDiesOnce) {
  static_assert(sizeof(Holder<200>) > tg::BackwardFn::kInline);
  check_lifetime<200>();
}

TEST(BackwardFn, EmplaceReplacesTheClosure) {
  auto a = std::make_shared<int>(1), b = std::make_shared<int>(2);
  tg::BackwardFn f(Holder<200>{a});
  f.emplace(Holder<8>{b});
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 2);
  EXPECT_EQ(f(tg::scalar(5.0), Tensor())[0].item(), 10.0);
}

TEST(Tape, BackwardReleasesTheClosuresUnlessRetained) {
  tg::Rng rng(1);
  Tensor x = tg::randn({3}, rng).set_requires_grad();
  Tensor w = tg::randn({3}, rng);
  const long before = w.impl_ptr().use_count();
  Tensor y = tg::sum_of_squares(tg::mul(x, w));  // mul's closure holds x and w
  EXPECT_GT(w.impl_ptr().use_count(), before);
  y.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_GT(w.impl_ptr().use_count(), before);
  y.backward();
  EXPECT_EQ(w.impl_ptr().use_count(), before);
  EXPECT_THROW(y.backward(), tg::GraphError);
}

// An op whose backward runs a backward of its own: y = c sum(x^2), with dx = c dy tg::grad of
// sum(x^2) (a second pass inside the first one's closure).
Tensor nested_op(const Tensor& x, double c) {
  Tensor y = tg::scale(tg::sum_of_squares(x.detach()), c);
  return tg::record("nested", y, {x}, [x, c](const Tensor& dy) -> Grads {
    Tensor d2;
    {
      tg::GradModeGuard on(true);  // the outer pass records nothing; this graph is its own
      Tensor xi = x.detach().set_requires_grad();
      d2 = tg::grad({tg::sum_of_squares(xi)}, {xi})[0];  // 2 x, from a nested pass
    }
    return {tg::mul(tg::scale(d2, c), dy)};
  });
}

TEST(Tape, BackwardInsideABackwardLeavesTheOuterPassIntact) {
  tg::Rng rng(2);
  Tensor x = tg::randn({4}, rng).set_requires_grad();
  Tensor w = tg::randn({4}, rng).set_requires_grad();
  // The nested op sits between two ordinary ones, so the outer pass has work before and after.
  const Tensor u = tg::mul(x, w);
  const Tensor loss = tg::add(nested_op(u, 0.5), tg::sum_of_squares(w));
  loss.backward();
  // loss = 0.5 sum (x w)^2 + sum w^2: dx = x w^2, dw = x^2 w + 2 w
  for (int i = 0; i < 4; ++i) {
    const double xi = x.at({i}), wi = w.at({i});
    EXPECT_NEAR(x.grad().at({i}), xi * wi * wi, 1e-12);
    EXPECT_NEAR(w.grad().at({i}), xi * xi * wi + 2 * wi, 1e-12);
  }
}

TEST(Tape, GradOfLeafOutputsAndUnreachedInputs) {
  tg::Rng rng(3);
  Tensor x = tg::randn({2}, rng).set_requires_grad();
  Tensor z = tg::randn({2}, rng).set_requires_grad();  // never used
  const Tensor s = tg::sum_of_squares(x);
  // x is both an output (seeded with ones) and an input; z gets zeros; s itself gets its seed.
  const auto g = tg::grad({s, x}, {x, z, s}, {Tensor(), tg::ones({2})});
  for (int i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(g[0].at({i}), 2 * x.at({i}) + 1.0);
    EXPECT_EQ(g[1].at({i}), 0.0);
  }
  EXPECT_EQ(g[2].item(), 1.0);
  // The same leaf twice among the inputs gets its gradient twice.
  const auto twice = tg::grad({tg::sum_of_squares(x)}, {x, x});
  EXPECT_EQ(twice[0].to_vector(), twice[1].to_vector());
  EXPECT_DOUBLE_EQ(twice[0].at({1}), 2 * x.at({1}));
}

TEST(Tape, ManyLeavesEachGetTheirOwnGradient) {
  // Enough leaves that their lookup in the pass cannot be a lucky linear match.
  tg::Rng rng(4);
  std::vector<Tensor> leaves;
  Tensor acc = tg::zeros({3});
  for (int i = 0; i < 40; ++i) {
    leaves.push_back(tg::randn({3}, rng).set_requires_grad());
    acc = tg::add(acc, tg::scale(leaves.back(), i + 1.0));
  }
  tg::sum_of_squares(acc).backward();
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(leaves[i].grad().at({j}), 2 * acc.at({j}) * (i + 1.0), 1e-9);
}

}  // namespace
