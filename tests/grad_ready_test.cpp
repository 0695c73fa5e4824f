// GradReadyScope: the engine tells, during a backward pass, when a leaf's gradient for the pass is
// complete. The net below is x -> tanh(x W) -> probe -> tanh(. V) -> (. W^T) * R, with W used
// twice (first and last layer, as a GPT's tied embedding): V is complete in the middle of the
// pass (before the probe's backward runs), W only at the end, after its second use.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/autograd/grad_ready.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace tg {
namespace {

// The identity, counting how often its backward ran.
Tensor probe(const Tensor& a, int& backwards) {
  return record("probe", a.detach().clone(), {a}).formula([&backwards](const Tensor& dY) -> Grads {
    ++backwards;
    return {dY};
  });
}

struct Net {
  Net() {
    Rng rng(3);
    x = randn({4, 3}, rng);
    R = randn({4, 3}, rng);  // random weights reduce the output, so every element counts
    W = randn({3, 3}, rng).set_requires_grad();
    V = randn({3, 3}, rng).set_requires_grad();
  }
  Tensor loss(int& probe_backwards) const {
    const Tensor a = probe(tanh(matmul(x, W)), probe_backwards);
    const Tensor b = tanh(matmul(a, V));
    return sum(mul(matmul(b, W, false, true), R));
  }
  Tensor x, R, W, V;
};

struct Call {
  const TensorImpl* leaf;
  std::vector<double> grad;
  int probe_backwards;  // when the call came
  bool grad_committed;  // whether leaf.grad() was defined then
};

TEST(GradReady, EachLeafOnceWhenItsLastUseRanWithTheFinalGradient) {
  Net net;
  int probes = 0;
  std::vector<Call> calls;
  {
    GradReadyScope scope([&](const Tensor& leaf, const Tensor& grad) {
      calls.push_back({leaf.impl_ptr().get(), grad.to_vector(), probes, leaf.grad().defined()});
    });
    net.loss(probes).backward();
  }
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].leaf, net.V.impl_ptr().get());
  EXPECT_EQ(calls[1].leaf, net.W.impl_ptr().get());
  // V was complete before the layer below it ran backward; W after, once its two uses were in.
  EXPECT_EQ(calls[0].probe_backwards, 0);
  EXPECT_EQ(calls[1].probe_backwards, 1);
  // The pass commits .grad() only after the whole graph ran.
  EXPECT_FALSE(calls[0].grad_committed);
  EXPECT_FALSE(calls[1].grad_committed);
  // What the callback saw is the final gradient: what .grad() got, and what tg::grad computes
  // on a fresh graph.
  EXPECT_EQ(calls[0].grad, net.V.grad().to_vector());
  EXPECT_EQ(calls[1].grad, net.W.grad().to_vector());
  const std::vector<Tensor> ref = grad({net.loss(probes)}, {net.W, net.V});
  EXPECT_EQ(calls[1].grad, ref[0].to_vector());
  EXPECT_EQ(calls[0].grad, ref[1].to_vector());
}

TEST(GradReady, TheCallbackSeesThisPassAloneAndNoScopeMeansNoCalls) {
  Net net;
  int probes = 0;
  net.loss(probes).backward();  // no scope: .grad() holds one pass
  const std::vector<double> once = net.W.grad().to_vector();
  int calls = 0;
  std::vector<double> seen;
  {
    GradReadyScope scope([&](const Tensor& leaf, const Tensor& grad) {
      ++calls;
      if (leaf.impl_ptr() == net.W.impl_ptr()) {
        seen = grad.to_vector();
        EXPECT_EQ(leaf.grad().to_vector(), once);  // not yet added to
      }
    });
    net.loss(probes).backward();
  }
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen, once);  // the same pass again: this pass's gradient alone
  const std::vector<double> twice = net.W.grad().to_vector();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(twice[i], once[i] + once[i]);
  // Negative control: the scope is gone, so a pass makes no calls.
  net.loss(probes).backward();
  EXPECT_EQ(calls, 2);
}

TEST(GradReady, ScopesNestAndStayOnTheirThread) {
  Net net;
  int probes = 0, outer = 0, inner = 0, other_thread = 0;
  GradReadyScope a([&](const Tensor&, const Tensor&) { ++outer; });
  {
    GradReadyScope b([&](const Tensor&, const Tensor&) { ++inner; });
    net.loss(probes).backward();
  }
  EXPECT_EQ(inner, 2);
  EXPECT_EQ(outer, 0);
  net.loss(probes).backward();
  EXPECT_EQ(outer, 2);
  std::thread t([&] {
    Net own;
    int p = 0;
    own.loss(p).backward();  // this thread has no scope
    GradReadyScope c([&](const Tensor&, const Tensor&) { ++other_thread; });
    own.loss(p).backward();
  });
  t.join();
  EXPECT_EQ(other_thread, 2);
  EXPECT_EQ(outer, 2);
}

// Scopes held by objects may end out of order: the newest living one stays in charge.
TEST(GradReady, ScopesMayEndInAnyOrder) {
  Net net;
  int probes = 0, first = 0, second = 0, third = 0;
  auto a = std::make_unique<GradReadyScope>([&](const Tensor&, const Tensor&) { ++first; });
  auto b = std::make_unique<GradReadyScope>([&](const Tensor&, const Tensor&) { ++second; });
  a.reset();  // the older one ends first: b is still in charge
  net.loss(probes).backward();
  EXPECT_EQ(second, 2);
  auto c = std::make_unique<GradReadyScope>([&](const Tensor&, const Tensor&) { ++third; });
  b.reset();  // the middle one ends: c is still in charge
  net.loss(probes).backward();
  EXPECT_EQ(third, 2);
  c.reset();
  net.loss(probes).backward();  // none left
  EXPECT_EQ(first + second + third, 4);
}

// Two uses in one node (x * x), a use that sends no gradient, create_graph, and a leaf whose
// requires_grad was turned off after recording.
TEST(GradReady, UsesInOneNodeUndefinedPartsCreateGraphAndTurnedOffLeaves) {
  Rng rng(1);
  Tensor x = randn({3}, rng).set_requires_grad(), y = randn({3}, rng).set_requires_grad();
  std::vector<std::pair<const TensorImpl*, std::vector<double>>> calls;
  GradReadyScope scope([&](const Tensor& leaf, const Tensor& g) {
    calls.emplace_back(leaf.impl_ptr().get(), g.to_vector());
  });
  sum(mul(x, x)).backward();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, x.grad().to_vector());

  calls.clear();
  x.zero_grad();
  const Tensor half = record("half", x.detach().clone(), {x, y})
                          .formula([](const Tensor& dY) -> Grads { return {dY, Tensor()}; });
  sum(mul(half, x)).backward();  // y's only use sends nothing: no call for y
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, x.impl_ptr().get());
  EXPECT_EQ(calls[0].second, x.grad().to_vector());

  calls.clear();
  x.set_grad(Tensor());
  sum(mul(mul(x, x), x)).backward(Tensor(), false, true);  // create_graph
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, x.grad().to_vector());
  x.set_grad(Tensor());  // the recorded gradient refers back to x: drop it, or x never dies

  calls.clear();
  const Tensor L = sum(mul(x, y));
  x.set_requires_grad(false);
  L.backward();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, y.impl_ptr().get());
}

TEST(GradReady, GradMakesNoCallsAndAnOutputLeafIsToldItsSeed) {
  Net net;
  int probes = 0, calls = 0;
  std::vector<double> seed;
  GradReadyScope scope([&](const Tensor&, const Tensor& g) {
    ++calls;
    seed = g.to_vector();
  });
  grad({net.loss(probes)}, {net.W});  // tg::grad writes no .grad(): nothing to tell
  EXPECT_EQ(calls, 0);
  Tensor s = scalar(2.0).set_requires_grad();
  s.backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seed, std::vector<double>{1.0});
}

TEST(GradReady, AnExceptionFromTheCallbackEndsThePassAndLeavesGradUntouched) {
  Net net;
  int probes = 0;
  net.loss(probes).backward();
  const std::vector<double> w = net.W.grad().to_vector(), v = net.V.grad().to_vector();
  GradReadyScope scope([&](const Tensor&, const Tensor&) { throw ValueError("stop here"); });
  test::expect_throws<ValueError>([&] { net.loss(probes).backward(); }, {"stop here"});
  EXPECT_EQ(net.W.grad().to_vector(), w);
  EXPECT_EQ(net.V.grad().to_vector(), v);
}

TEST(GradReady, ABackwardInsideTheCallbackIsRefused) {
  Net net;
  int probes = 0;
  Tensor other = scalar(1.0).set_requires_grad();
  GradReadyScope scope([&](const Tensor&, const Tensor&) { mul(other, other).backward(); });
  test::expect_throws<GraphError>([&] { net.loss(probes).backward(); },
                                  {"inside a derivative"});
}

}  // namespace
}  // namespace tg
