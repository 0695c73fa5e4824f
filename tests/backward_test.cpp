// The tape: accumulation, detach, grad mode, retain_graph, create_graph (Hessian-vector
// products), a 100,000-op chain, threads, fan-out, the caching allocator.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/storage.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;
using V = std::vector<double>;

Tensor leaf(const V& v, const tg::Shape& s) { return tg::from_vector(v, s).set_requires_grad(); }

TEST(Backward, ScalarAccumulatesUntilZeroGrad) {
  const Tensor x = leaf({1, 2, 3}, {3});
  tg::sum_of_squares(x).backward();
  EXPECT_EQ(x.grad().to_vector(), V({2, 4, 6}));
  tg::sum_of_squares(x).backward();
  EXPECT_EQ(x.grad().to_vector(), V({4, 8, 12}));
  x.zero_grad();
  EXPECT_EQ(x.grad().to_vector(), V({0, 0, 0}));
  tg::sum_of_squares(x).backward();
  EXPECT_EQ(x.grad().to_vector(), V({2, 4, 6}));
}

TEST(Backward, ExplicitGradOutputOnNonScalar) {
  const Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  const Tensor w = tg::from_vector({5, 6, 7, 8}, {2, 2});
  tg::mul(x, w).backward(tg::from_vector({1, 0, -1, 2}, {2, 2}));
  EXPECT_EQ(x.grad().to_vector(), V({5, 0, -7, 16}));
  EXPECT_FALSE(w.grad().defined());
}

TEST(Backward, RetainGraphAllowsASecondPass) {
  const Tensor x = leaf({1, -2}, {2});
  const Tensor y = tg::sum_of_squares(tg::scale(x, 3.0));  // 9 x^2
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), V({36, -72}));
}

TEST(Backward, SecondPassWithoutRetainThrowsAndKeepsGrad) {
  const Tensor x = leaf({1, -2}, {2});
  const Tensor y = tg::sum_of_squares(tg::scale(x, 3.0));
  y.backward();
  tg::test::expect_throws<tg::GraphError>([&] { y.backward(); }, {"freed", "retain_graph"});
  EXPECT_EQ(x.grad().to_vector(), V({18, -36}));
}

// The leaf's .grad() is its own: accumulating into it never writes into the caller's grad_output,
// even when the gradient reaches the leaf through a storage-sharing reshape.
TEST(Backward, GradDoesNotAliasGradOutput) {
  const Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor go = tg::from_vector({1, 1, 1, 1, 1, 1}, {6});
  tg::reshape(x, {6}).backward(go);
  tg::reshape(x, {6}).backward(go);
  EXPECT_EQ(go.to_vector(), V({1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(x.grad().to_vector(), V({2, 2, 2, 2, 2, 2}));
  x.zero_grad();
  EXPECT_EQ(go.to_vector(), V({1, 1, 1, 1, 1, 1}));
}

TEST(Backward, CreateGraphGradDoesNotAliasGradOutput) {
  const Tensor x = leaf({1, 2}, {2});
  const Tensor go = tg::from_vector({1, 1}, {2});
  tg::add(x, tg::zeros({2})).backward(go, false, /*create_graph=*/true);
  tg::add(x, tg::zeros({2})).backward(go);
  EXPECT_EQ(x.grad().to_vector(), V({2, 2}));
  x.zero_grad();
  EXPECT_EQ(go.to_vector(), V({1, 1}));
  x.set_grad(Tensor());  // break the create_graph cycle (x -> grad -> graph -> x)
}

// Every sum the engine makes follows one rule: it writes in place only into a buffer nobody else
// sees. Here the caller's grad_output reaches the leaf twice (x + x), inside the pass.
TEST(Backward, FanOutNeverWritesIntoTheGradOutput) {
  const Tensor x = leaf({1, 2}, {2});
  const Tensor go = tg::from_vector({3, -1}, {2});
  tg::add(x, x).backward(go);
  EXPECT_EQ(go.to_vector(), V({3, -1}));
  EXPECT_EQ(x.grad().to_vector(), V({6, -2}));
  tg::add(x, x).backward(go);  // and at the commit, into the .grad() the first pass made
  EXPECT_EQ(go.to_vector(), V({3, -1}));
  EXPECT_EQ(x.grad().to_vector(), V({12, -4}));
}

// A gradient that create_graph recorded keeps its values: a later plain backward sums into a
// new buffer, even when nobody else holds the recorded one.
TEST(Backward, ARecordedGradIsNeverWrittenInPlace) {
  const Tensor x = leaf({1, 2}, {2});
  tg::sum_of_squares(x).backward(Tensor(), false, /*create_graph=*/true);
  const void* recorded = nullptr;
  {
    const Tensor g = x.grad();
    ASSERT_FALSE(g.is_leaf());
    recorded = g.data<double>();
  }
  tg::sum_of_squares(x).backward();
  const Tensor g = x.grad();
  EXPECT_EQ(g.to_vector(), V({4, 8}));
  EXPECT_NE(g.data<double>(), recorded);
  x.set_grad(Tensor());  // break the create_graph cycle
}

// tg::grad's retain_graph, unset, is create_graph (PyTorch's None); set, it is what it says.
TEST(Grad, RetainGraphDefaultsToCreateGraph) {
  const Tensor x = leaf({1, -2}, {2});
  const Tensor y = tg::sum_of_squares(tg::scale(x, 3.0));  // 9 x^2
  EXPECT_EQ(tg::grad({y}, {x})[0].to_vector(), V({18, -36}));
  tg::test::expect_throws<tg::GraphError>([&] { tg::grad({y}, {x}); }, {"freed", "retain_graph"});
  const Tensor z = tg::sum_of_squares(tg::scale(x, 3.0));
  tg::grad({z}, {x}, {}, /*create_graph=*/true);
  tg::grad({z}, {x}, {}, /*create_graph=*/false, /*retain_graph=*/true);
  EXPECT_EQ(tg::grad({z}, {x}, {}, false, /*retain_graph=*/false)[0].to_vector(), V({18, -36}));
  tg::test::expect_throws<tg::GraphError>([&] { tg::grad({z}, {x}); }, {"freed"});
  const Tensor w = tg::sum_of_squares(tg::scale(x, 3.0));
  tg::grad({w}, {x}, {}, /*create_graph=*/true, /*retain_graph=*/false);
  tg::test::expect_throws<tg::GraphError>([&] { tg::grad({w}, {x}); }, {"freed"});
}

TEST(Detach, SharesDataButNotTheTape) {
  const Tensor x = leaf({1, 2}, {2});
  const Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.data<double>(), x.data<double>());
  tg::sum(tg::mul(d, x)).backward();  // d is a constant: dL/dx = d, not 2 x
  EXPECT_EQ(x.grad().to_vector(), V({1, 2}));
}

TEST(NoGradGuard, RecordsNothingAndRestores) {
  const Tensor x = leaf({1, 2}, {2});
  {
    tg::NoGradGuard guard;
    const Tensor y = tg::mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    EXPECT_EQ(y.op_name(), "");
    EXPECT_THROW(y.backward(), tg::GraphError);
  }
  EXPECT_TRUE(tg::is_grad_enabled());
  EXPECT_EQ(tg::mul(x, x).op_name(), "mul");
}

TEST(NoGradGuard, IsThreadLocal) {
  const Tensor x = leaf({1, 2}, {2});
  tg::NoGradGuard guard;
  bool enabled_there = false, recorded_there = false;
  std::thread t([&] {
    enabled_there = tg::is_grad_enabled();
    recorded_there = tg::scale(x, 2.0).requires_grad();
  });
  t.join();
  EXPECT_TRUE(enabled_there);
  EXPECT_TRUE(recorded_there);
  EXPECT_FALSE(tg::scale(x, 2.0).requires_grad());
}

// L = sum_of_squares(x) * sum(x) = ss s:  g = 2 s x + ss,  H v = 2 s v + 2 (1.v) x + 2 (x.v) 1.
// x = (1, -2, 0.5), v = (1, 2, 3): s = -0.5, ss = 5.25, 1.v = 6, x.v = -1.5.
TEST(CreateGraph, HessianVectorProduct) {
  const Tensor x = leaf({1, -2, 0.5}, {3});
  const Tensor L = tg::mul(tg::sum_of_squares(x), tg::sum(x));
  const Tensor g = tg::grad({L}, {x}, {}, /*create_graph=*/true)[0];
  EXPECT_TRUE(g.requires_grad());
  const V gv = g.to_vector();
  EXPECT_NEAR(gv[0], 4.25, 1e-14);
  EXPECT_NEAR(gv[1], 7.25, 1e-14);
  EXPECT_NEAR(gv[2], 4.75, 1e-14);
  const Tensor v = tg::from_vector({1, 2, 3}, {3});
  const V Hv = tg::grad({tg::sum(tg::mul(g, v))}, {x})[0].to_vector();
  EXPECT_NEAR(Hv[0], 8, 1e-14);
  EXPECT_NEAR(Hv[1], -29, 1e-14);
  EXPECT_NEAR(Hv[2], 0, 1e-14);
}

// Sum of x_i^3 through backward(create_graph): x.grad() = 3 x^2 is itself differentiable.
TEST(CreateGraph, BackwardRecordsTheGradient) {
  const Tensor x = leaf({2, -1}, {2});
  tg::sum(tg::mul(tg::mul(x, x), x)).backward(Tensor(), false, /*create_graph=*/true);
  const Tensor g = x.grad();
  EXPECT_EQ(g.to_vector(), V({12, 3}));
  ASSERT_TRUE(g.requires_grad());
  const V H1 = tg::grad({tg::sum(g)}, {x})[0].to_vector();  // d/dx sum(3 x^2) = 6 x
  EXPECT_EQ(H1, V({12, -6}));
  x.set_grad(Tensor());  // x.grad()'s graph holds x: break the cycle (see below)
}

// As in PyTorch, backward(create_graph) makes a cycle: x owns x.grad(), whose graph refers back
// to x. Clearing the gradient must free both.
TEST(CreateGraph, ClearingTheGradFreesTheGraph) {
  std::weak_ptr<tg::TensorImpl> x_alive, grad_alive;
  {
    const Tensor x = leaf({2, -1}, {2});
    x_alive = x.impl_ptr();
    tg::sum(tg::mul(tg::mul(x, x), x)).backward(Tensor(), false, /*create_graph=*/true);
    grad_alive = x.grad().impl_ptr();
    x.set_grad(Tensor());
  }
  EXPECT_TRUE(x_alive.expired());
  EXPECT_TRUE(grad_alive.expired());
}

TEST(Backward, ChainOf100000Ops) {
  const Tensor x = leaf({1, -1}, {2});
  {
    Tensor y = x;
    for (int i = 0; i < 50000; ++i) y = tg::add(tg::scale(y, 1.0), tg::scalar(1.0));
    EXPECT_EQ(y.to_vector(), V({50001, 49999}));
    y.backward(tg::from_vector({1, 2}, {2}), /*retain_graph=*/true);
    EXPECT_EQ(x.grad().to_vector(), V({1, 2}));
  }  // the retained 100,000-node graph is destroyed here, without recursion
  {
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = tg::scale(y, 1.0);
  }  // and one that never went through backward
  EXPECT_EQ(x.grad().to_vector(), V({1, 2}));
}

// y_t = softmax(X_t W) summed with weights; its gradient in W, from a fixed seed per t.
std::vector<double> graph_grad(uint64_t seed) {
  tg::Rng rng(seed);
  const Tensor X = tg::randn({3, 4}, rng);
  const Tensor W = tg::randn({4, 4}, rng).set_requires_grad();
  const Tensor R = tg::randn({3, 4}, rng);
  tg::sum(tg::mul(tg::softmax(tg::matmul(X, W)), R)).backward();
  return W.grad().to_vector();
}

TEST(Threads, IndependentGraphsMatchASingleThread) {
  constexpr int kIters = 200;
  std::vector<std::vector<double>> ref(2 * kIters);
  for (int i = 0; i < 2 * kIters; ++i) ref[i] = graph_grad(i);
  std::vector<std::vector<double>> got(2 * kIters);
  auto worker = [&](int first) {
    for (int i = first; i < 2 * kIters; i += 2) got[i] = graph_grad(i);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  for (int i = 0; i < 2 * kIters; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(got[i], ref[i]);
  }
}

// A steady forward + backward loop, the gradient cleared as `clear` says each step.
template <class Clear>
void expect_steady_after(int warm_up, Clear clear) {
  const Tensor W = tg::full({16, 16}, 0.01).set_requires_grad();
  const Tensor X = tg::full({4, 8, 16}, 0.5);
  auto step = [&] {
    clear(W);
    tg::scale(tg::sum_of_squares(tg::softmax(tg::matmul(X, W))), 0.5).backward();
  };
  for (int i = 0; i < warm_up; ++i) step();
  const tg::AllocatorStats before = tg::allocator_stats();
  for (int i = 0; i < 20; ++i) step();
  const tg::AllocatorStats after = tg::allocator_stats();
  EXPECT_EQ(after.os_allocations, before.os_allocations);
  EXPECT_GT(after.cache_hits, before.cache_hits + 20);  // the loop did allocate, from the cache
}

TEST(Allocator, SteadyLoopStopsAskingTheOs) {
  // Clearing the gradient to undefined returns its buffer: one warm-up iteration is enough.
  expect_steady_after(1, [](const Tensor& W) { W.set_grad(Tensor()); });
}

TEST(Allocator, SteadyLoopWithZeroGradStopsAskingTheOs) {
  // zero_grad() keeps W.grad()'s buffer, which the first backward took over from its result, so
  // the second iteration needs one more buffer of that size for the result it adds in.
  expect_steady_after(2, [](const Tensor& W) { W.zero_grad(); });
}

// One X feeds Q, K and V; L = sum(Q r1) + sum(K r2) + sum(V r3) with (1, 1) outputs, so
// dX = r1 W_Q^T + r2 W_K^T + r3 W_V^T = (1 + 6 + 1.5, 2 - 2 + 12).
TEST(FanOut, GradientsFromEveryUseAdd) {
  const Tensor X = leaf({0.3, -0.7}, {1, 2});
  const Tensor W_Q = tg::from_vector({1, 2}, {2, 1}), W_K = tg::from_vector({3, -1}, {2, 1}),
               W_V = tg::from_vector({0.5, 4}, {2, 1});
  const Tensor L = tg::add(tg::add(tg::sum(tg::scale(tg::matmul(X, W_Q), 1.0)),
                                   tg::sum(tg::scale(tg::matmul(X, W_K), 2.0))),
                           tg::sum(tg::scale(tg::matmul(X, W_V), 3.0)));
  L.backward();
  EXPECT_EQ(X.grad().to_vector(), V({8.5, 12}));
}

}  // namespace
