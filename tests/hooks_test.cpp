// Tensor hooks (register_hook, its handle, retain_grad), anomaly mode (tg::AnomalyGuard) and
// module forward hooks, as PyTorch's Tensor.register_hook, Tensor.retain_grad,
// torch.autograd.detect_anomaly and Module.register_forward_hook: values worked out by hand for
// small graphs.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>
#include "test_util.h"

namespace {

using tg::Tensor;
using V = std::vector<double>;

Tensor vec(const V& v) { return tg::from_vector(v, {static_cast<int64_t>(v.size())}, tg::Dtype::f64); }

TEST(Hooks, ANonLeafHookSeesAndReplacesItsGradient) {
  Tensor x = vec({1, 2, 3}).set_requires_grad();
  const Tensor w = vec({0.5, -1, 2});
  Tensor y = x * 2.0;  // dL/dy = w, then the hook triples it: dL/dx = 2 * 3 w
  V seen;
  y.register_hook([&](const Tensor& g) {
    seen = g.to_vector();
    return g * 3.0;
  });
  tg::sum(y * w).backward();
  EXPECT_EQ(seen, (V{0.5, -1, 2}));
  EXPECT_EQ(x.grad().to_vector(), (V{3, -6, 12}));
  // tg::grad sees the hook too.
  Tensor y2 = x * 2.0;
  y2.register_hook([](const Tensor& g) { return g * 3.0; });
  EXPECT_EQ(tg::grad({tg::sum(y2 * w)}, {x})[0].to_vector(), (V{3, -6, 12}));
}

TEST(Hooks, ALeafHookRunsOnceOnThePassSumBeforeGrad) {
  Tensor x = vec({1, 2}).set_requires_grad();
  int calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    return g + 1.0;
  });
  // x feeds two ops: the hook sees their sum, 3 + 5, once.
  (tg::sum(x * 3.0) + tg::sum(x * 5.0)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(x.grad().to_vector(), (V{9, 9}));
  (tg::sum(x * 3.0)).backward();  // accumulates: 9 + (3 + 1)
  EXPECT_EQ(x.grad().to_vector(), (V{13, 13}));
  EXPECT_EQ(tg::grad({tg::sum(x * 2.0)}, {x})[0].to_vector(), (V{3, 3}));
}

TEST(Hooks, RunInOrderAndAHandleRemovesOne) {
  Tensor x = vec({1, 1}).set_requires_grad();
  Tensor y = x * 1.0;
  tg::HookHandle doubled = y.register_hook([](const Tensor& g) { return g * 2.0; });
  y.register_hook([](const Tensor& g) { return g + 1.0; });
  y.register_hook([](const Tensor&) { return Tensor(); });  // undefined: keeps the gradient
  tg::sum(y).backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(x.grad().to_vector(), (V{3, 3}));  // (1 * 2) + 1
  doubled.remove();
  x.zero_grad();
  tg::sum(y).backward();
  EXPECT_EQ(x.grad().to_vector(), (V{2, 2}));  // 1 + 1
  doubled.remove();                            // twice: nothing
}

TEST(Hooks, UnderCreateGraphAHookIsDifferentiated) {
  Tensor x = vec({1.5, -2}).set_requires_grad();
  Tensor y = x * x;
  y.register_hook([&](const Tensor& g) { return g * y; });  // dL/dy = y instead of 1
  // g = dL/dx = 2 x * y = 2 x^3, recorded with the hook's product.
  const Tensor g = tg::grad({tg::sum(y)}, {x}, {}, /*create_graph=*/true)[0];
  EXPECT_EQ(g.to_vector(), (V{2 * 1.5 * 1.5 * 1.5, -16}));
  // The second backward of sum(g) = sum(2 x y): 2 y directly, and through y 2 x, which the hook
  // (still registered) multiplies by y, times dy/dx = 2 x: 2 x^2 + 4 x^4. PyTorch 1.13 gives the
  // same [24.75, 72].
  tg::sum(g).backward();
  EXPECT_EQ(x.grad().to_vector(), (V{2 * 2.25 + 4 * 2.25 * 2.25, 8 + 64}));
}

TEST(Hooks, AHookOfTheWrongShapeIsAnErrorAndGradsStayUntouched) {
  Tensor x = vec({1, 2, 3}).set_requires_grad();
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor&) { return vec({1, 2}); });
  tg::test::expect_throws<tg::GraphError>([&] { tg::sum(y).backward(); },
                                          {"a hook on the output of 'scale'", "(2,)", "(3,)"});
  EXPECT_FALSE(x.grad().defined());
  Tensor z = vec({1, 2});
  tg::test::expect_throws<tg::GraphError>([&] { z.register_hook([](const Tensor& g) { return g; }); },
                                          {"register_hook", "does not require grad"});
}

TEST(Hooks, RetainGradKeepsANonLeafsGradientAcrossBackwards) {
  Tensor x = vec({1, 2}).set_requires_grad();
  Tensor y = x * 3.0;
  y.retain_grad();
  const Tensor L = tg::sum(y * vec({2, -1}));
  L.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(y.grad().to_vector(), (V{2, -1}));
  EXPECT_EQ(x.grad().to_vector(), (V{6, -3}));
  L.backward();
  EXPECT_EQ(y.grad().to_vector(), (V{4, -2}));  // accumulated, as a leaf's
  x.retain_grad();                               // a leaf: nothing to do
  tg::test::expect_throws<tg::GraphError>([&] { vec({1}).retain_grad(); },
                                          {"retain_grad", "does not require grad"});
}

TEST(Anomaly, ANonFiniteGradientThrowsNamingTheOpLineAndEntry) {
  Tensor x = vec({4, 0, 1}).set_requires_grad();
  const int line = __LINE__ + 1;
  const Tensor y = tg::sqrt(x);  // d sqrt / dx = 1 / (2 sqrt x): inf at x = 0
  tg::sum(y).backward(Tensor(), /*retain_graph=*/true);  // off: an inf gradient, no error
  EXPECT_TRUE(std::isinf(x.grad().to_vector()[1]));
  x.set_grad(Tensor());
  {
    tg::AnomalyGuard anomaly;
    EXPECT_TRUE(tg::is_anomaly_enabled());
    tg::test::expect_throws<tg::ValueError>(
        [&] { tg::sum(y).backward(); },
        {"anomaly", "'sqrt'", "hooks_test.cpp:" + std::to_string(line), "inf", "input 0",
         "at (1,)"});
    EXPECT_FALSE(x.grad().defined());
  }
  EXPECT_FALSE(tg::is_anomaly_enabled());
}

namespace nn = tg::nn;

TEST(ForwardHooks, SeeTheCallAndMayReplaceTheOutput) {
  tg::Rng rng(0);
  nn::Linear fc(3, 2, true, rng, tg::Dtype::f64);
  const Tensor x = tg::randn({4, 3}, rng, tg::Dtype::f64);
  const Tensor plain = fc(x);
  const nn::Module* seen = nullptr;
  Tensor seen_input, seen_output;
  nn::ForwardHookHandle h = fc.register_forward_hook(
      [&](const nn::Module& m, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
        seen = &m;
        seen_input = in[0];
        seen_output = out[0];
        out[0] = tg::scale(out[0], 2.0);  // as a hook that returns a new output
      });
  const Tensor doubled = fc(x);
  EXPECT_EQ(seen, &fc);
  EXPECT_EQ(&seen_input.impl(), &x.impl());
  EXPECT_EQ(seen_output.to_vector(), plain.to_vector());
  const V p = plain.to_vector(), d = doubled.to_vector();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(d[i], 2 * p[i]);
  // The replacement is on the tape: d sum(2 (x W^T + b)) / db = 2 per row.
  tg::sum(doubled).backward();
  EXPECT_EQ(fc.bias.grad().to_vector(), V({8, 8}));
  EXPECT_EQ(fc.forward(x).to_vector(), p);  // forward() itself runs no hook
  h.remove();
  EXPECT_EQ(fc(x).to_vector(), p);
}

TEST(ForwardHooks, RunInOrderInsideContainersAndModels) {
  tg::Rng rng(1);
  nn::Sequential net;
  nn::Linear& first = net.append(std::make_unique<nn::Linear>(3, 4, true, rng, tg::Dtype::f64));
  net.append(std::make_unique<nn::ReLU>());
  std::vector<std::string> log;
  first.register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) { log.push_back("a"); });
  nn::ForwardHookHandle b = first.register_forward_hook(
      [&](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) { log.push_back("b"); });
  net.register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>&) { log.push_back("net"); });
  net(tg::randn({2, 3}, rng, tg::Dtype::f64));
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "net"}));
  b.remove();
  log.clear();
  net(tg::randn({2, 3}, rng, tg::Dtype::f64));
  EXPECT_EQ(log, (std::vector<std::string>{"a", "net"}));

  // A GPT's block: the hook sees (B, T, C); zeroing the block's output changes the logits.
  nn::GPTConfig c{.vocab_size = 7, .block_size = 4, .n_layer = 2, .n_head = 2, .n_embd = 8, .dtype = tg::Dtype::f64};
  nn::GPT gpt(c, rng);
  const Tensor idx = tg::randint(0, 7, {2, 4}, rng);
  const Tensor plain = gpt(idx);
  tg::Shape shape;
  int calls = 0;
  gpt.transformer.h[1].register_forward_hook(
      [&](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& out) {
        shape = out[0].shape();
        ++calls;
        out[0] = tg::zeros_like(out[0]);
      });
  const Tensor changed = gpt(idx);
  EXPECT_EQ(shape, tg::Shape({2, 4, 8}));
  EXPECT_EQ(calls, 1);
  EXPECT_NE(changed.to_vector(), plain.to_vector());
}

TEST(ForwardHooks, ARecurrentLayerShowsItsOutputAndState) {
  tg::Rng rng(2);
  nn::LSTM lstm(3, 5, rng, {}, tg::Dtype::f64);
  const Tensor x = tg::randn({6, 2, 3}, rng, tg::Dtype::f64);
  std::vector<tg::Shape> shapes;
  lstm.register_forward_hook([&](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& out) {
    for (const Tensor& t : out) shapes.push_back(t.shape());
    out[2] = tg::zeros_like(out[2]);  // c_n
  });
  const nn::LSTMOutput y = lstm(x);
  EXPECT_EQ(shapes, (std::vector<tg::Shape>{tg::Shape({6, 2, 5}), tg::Shape({1, 2, 5}), tg::Shape({1, 2, 5})}));
  for (double v : y.state.c.to_vector()) EXPECT_EQ(v, 0.0);
  // A hook that changes the number of outputs is an error naming it.
  nn::Linear fc(3, 2, true, rng, tg::Dtype::f64);
  fc.register_forward_hook([](const nn::Module&, const std::vector<Tensor>&, std::vector<Tensor>& out) { out.push_back(out[0]); });
  tg::test::expect_throws<tg::ValueError>([&] { fc(tg::randn({1, 3}, rng, tg::Dtype::f64)); },
                                          {"forward hook 0", "left 2 outputs", "has 1"});
}

}  // namespace
