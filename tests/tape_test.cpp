// The tape's own machinery: backward closures (stored in the node, or in a pooled block when
// large), their release after a backward, and the engine's per-pass bookkeeping, which a
// backward run from inside another backward's closure must leave intact.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
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

// The same, with the nested pass going through the outer graph's own nodes (x is not detached):
// their per-pass slots must be saved and restored. `retain` is the nested pass's retain_graph.
Tensor nested_through(const Tensor& x, bool retain) {
  Tensor y = tg::sum_of_squares(x.detach());
  return tg::record("nested_through", y, {x}, [x, retain](const Tensor& dy) -> Grads {
    Tensor d;
    {
      tg::GradModeGuard on(true);
      d = tg::grad({tg::sum_of_squares(x)}, {x}, {}, false, retain ? 1 : 0)[0];  // 2 x
    }
    return {tg::mul(d.detach(), dy)};
  });
}

TEST(Tape, NestedBackwardThroughTheOuterNodes) {
  tg::Rng rng(5);
  Tensor x = tg::randn({3}, rng).set_requires_grad();
  Tensor w = tg::randn({3}, rng).set_requires_grad();
  const Tensor u = tg::mul(x, w);  // the nested pass goes through this node too
  tg::add(nested_through(u, /*retain=*/true), tg::sum_of_squares(w)).backward();
  // loss = sum (x w)^2 + sum w^2: dx = 2 x w^2, dw = 2 x^2 w + 2 w
  for (int i = 0; i < 3; ++i) {
    const double xi = x.at({i}), wi = w.at({i});
    EXPECT_NEAR(x.grad().at({i}), 2 * xi * wi * wi, 1e-12);
    EXPECT_NEAR(w.grad().at({i}), 2 * xi * xi * wi + 2 * wi, 1e-12);
  }
}

TEST(Tape, NestedBackwardThatFreesAnOuterNodeIsAnError) {
  tg::Rng rng(6);
  Tensor x = tg::randn({3}, rng).set_requires_grad();
  Tensor w = tg::randn({3}, rng).set_requires_grad();
  const Tensor loss = nested_through(tg::mul(x, w), /*retain=*/false);
  try {
    loss.backward();
    FAIL() << "expected a GraphError";
  } catch (const tg::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'mul'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(x.grad().defined());  // nothing was committed
}

TEST(Tape, NestedBackwardThatThrowsLeavesTheOuterPassIntact) {
  tg::Rng rng(7);
  Tensor x = tg::randn({2}, rng).set_requires_grad();
  Tensor y = tg::sum_of_squares(x.detach());
  y = tg::record("throws_inside", y, {x}, [x](const Tensor& dy) -> Grads {
    {
      tg::GradModeGuard on(true);
      // a non-scalar output without grad_output: the nested pass throws after it started
      EXPECT_THROW(tg::grad({tg::mul(x, x)}, {x}, {}, false, 1), tg::GraphError);
    }
    return {tg::mul(tg::scale(x.detach(), 2.0), dy)};
  });
  tg::add(y, tg::sum_of_squares(x)).backward();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(x.grad().at({i}), 4 * x.at({i}), 1e-12);
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
