// The tape's own machinery: backward closures (stored in the node, or in a pooled block when
// large), their release after a backward, and the engine's per-pass bookkeeping, which a
// backward run from inside another backward's closure must leave intact.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

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

struct alignas(64) OverAligned {
  double v = 4.0;
  Grads operator()(const Tensor& dY, const Tensor&) const {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(this) % 64, 0u);  // its alignment is honoured
    return {tg::scale(dY, v)};
  }
};

TEST(BackwardFn, OverAlignedClosureIsAligned) {
  tg::BackwardFn f(OverAligned{});
  tg::BackwardFn g(std::move(f));
  EXPECT_EQ(g(tg::scalar(2.0), Tensor())[0].item(), 8.0);
}

// A closure aligned to 16 (past a pointer's 8, within malloc's): a pooled block, not in place.
struct alignas(16) SixteenAligned {
  std::shared_ptr<int> token;
  Grads operator()(const Tensor& dY, const Tensor&) const {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(this) % 16, 0u);  // its alignment is honoured
    return {tg::scale(dY, *token)};
  }
};

TEST(BackwardFn, ClosureAlignedTo16IsAlignedAndDiesOnce) {
  auto token = std::make_shared<int>(3);
  {
    tg::BackwardFn f(SixteenAligned{token});
    tg::BackwardFn g(std::move(f));
    EXPECT_EQ(token.use_count(), 2);  // moved, not copied
    EXPECT_EQ(g(tg::scalar(2.0), Tensor())[0].item(), 6.0);
  }
  EXPECT_EQ(token.use_count(), 1);  // destroyed exactly once
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

// An op whose derivative runs a backward of its own: the engine is not re-entrant, so the inner
// pass is refused with a GraphError that says why, and the outer pass fails cleanly.
Tensor nested_op(const Tensor& x) {
  Tensor y = tg::sum_of_squares(x.detach());
  return tg::record("nested", y, {x}).formula([x](const Tensor& dy) -> Grads {
    tg::GradModeGuard on(true);
    Tensor xi = x.detach().set_requires_grad();
    const Tensor d2 = tg::grad({tg::sum_of_squares(xi)}, {xi})[0];  // a pass inside a pass
    return {tg::mul(d2, dy)};
  });
}

TEST(Tape, BackwardInsideADerivativeIsRefused) {
  tg::Rng rng(2);
  Tensor x = tg::randn({4}, rng).set_requires_grad();
  Tensor w = tg::randn({4}, rng).set_requires_grad();
  const Tensor loss = tg::add(nested_op(tg::mul(x, w)), tg::sum_of_squares(w));
  try {
    loss.backward(Tensor(), /*retain_graph=*/true);
    FAIL() << "expected a GraphError";
  } catch (const tg::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("inside a derivative"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'nested'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(x.grad().defined());  // nothing was committed
  EXPECT_FALSE(w.grad().defined());
  // The pass that failed released the engine: the next backward on this thread runs.
  const Tensor ok = tg::sum_of_squares(tg::mul(x, w));
  ok.backward();
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(x.grad().at({i}), 2 * x.at({i}) * w.at({i}) * w.at({i}), 1e-12);
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

TEST(Tape, OneLeafUsedByThousandsOfNodes) {
  // Each use notes the leaf once more; the pass must still give it one gradient, the sum.
  tg::Rng rng(8);
  Tensor w = tg::randn({2}, rng).set_requires_grad();
  Tensor other = tg::randn({2}, rng).set_requires_grad();
  Tensor acc = tg::mul(other, w);
  for (int i = 0; i < 5000; ++i) acc = tg::add(acc, w);
  tg::sum_of_squares(acc).backward();  // acc = other w + 5000 w
  for (int j = 0; j < 2; ++j) {
    const double a = acc.at({j});
    EXPECT_NEAR(w.grad().at({j}), 2 * a * (other.at({j}) + 5000.0), 1e-6 * std::abs(a) * 5000);
    EXPECT_NEAR(other.grad().at({j}), 2 * a * w.at({j}), 1e-9 * std::abs(a));
  }
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
