// tg::checkpoint (ops/checkpoint.h): the gradients of a checkpointed region equal the plain
// run's bit for bit (GPT and Llama blocks, dropout on, several steps; several outputs, nesting,
// tg::grad, create_graph, retain_graph, GradReadyScope), its intermediates are not kept, and
// what would make the recomputation wrong is refused.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tapegrad/autograd/grad_ready.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/llama.h>
#include <tapegrad/ops/ops.h>

namespace tg {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.impl().storage->data(), b.impl().storage->data(),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

Tensor batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Rng rng(seed);
  return randint(0, V, {B, T}, rng);
}

// Two training steps' losses and the second step's gradients of a GPT (dropout on, its Rng
// seeded `dropout_seed`), its blocks checkpointed or not.
struct StepsRun {
  std::vector<Tensor> losses;
  NamedTensors grads;
};
StepsRun gpt_steps(bool checkpointed, Dtype dtype, uint64_t dropout_seed) {
  nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                  .dropout = 0.1, .dtype = dtype};
  c.checkpoint_blocks = checkpointed;
  Rng init(3);
  nn::GPT model(c, init);
  model.set_seed(dropout_seed);
  StepsRun run;
  for (uint64_t step = 0; step < 2; ++step) {
    for (Tensor& p : model.parameters()) p.zero_grad();
    const Tensor loss = model.loss(batch(3, 8, 11, 10 + step), batch(3, 8, 11, 20 + step));
    loss.backward();
    run.losses.push_back(loss.detach());
  }
  for (const auto& [name, p] : model.named_parameters()) run.grads.emplace_back(name, p.grad());
  return run;
}

void expect_same_run(const StepsRun& a, const StepsRun& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) EXPECT_TRUE(same_bits(a.losses[s], b.losses[s])) << "step " << s;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_TRUE(same_bits(a.grads[i].second, b.grads[i].second)) << a.grads[i].first;
}

TEST(Checkpoint, GptBlocksGiveThePlainRunsGradientsBitForBitWithDropout) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const StepsRun plain = gpt_steps(false, dtype, 7);
    expect_same_run(gpt_steps(true, dtype, 7), plain);
    // The negative control: other dropout masks change every block's gradients, and the
    // comparison sees it.
    const StepsRun other = gpt_steps(true, dtype, 8);
    int differ = 0;
    for (size_t i = 0; i < plain.grads.size(); ++i) differ += !same_bits(plain.grads[i].second, other.grads[i].second);
    EXPECT_GT(differ, static_cast<int>(plain.grads.size()) / 2);
  }
}

TEST(Checkpoint, LlamaLayersGiveThePlainRunsGradientsBitForBit) {
  const auto run = [](bool checkpointed) {
    nn::LlamaConfig c{.vocab_size = 13, .hidden_size = 16, .intermediate_size = 24,
                      .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2,
                      .max_position_embeddings = 8, .dtype = Dtype::f64};
    c.checkpoint_blocks = checkpointed;
    Rng init(5);
    nn::Llama model(c, init);
    model.loss(batch(2, 8, 13, 1), batch(2, 8, 13, 2)).backward();
    return model.named_parameters();
  };
  const NamedTensors plain = run(false), checkpointed = run(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(same_bits(plain[i].second.grad(), checkpointed[i].second.grad())) << plain[i].first;
}

// A region that reads a weight it is not given (as a block reads its parameters), makes an
// intermediate, and returns two outputs.
struct Region {
  Tensor W;
  std::shared_ptr<std::weak_ptr<Storage>> intermediate = std::make_shared<std::weak_ptr<Storage>>();
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) const {
    const Tensor h = tanh(matmul(in[0], W));  // (3, 4)
    *intermediate = h.impl().storage;
    return {mul(h, in[1]), sum(exp(h), 0)};  // (3, 4), (4)
  }
};

Tensor reduce(const std::vector<Tensor>& ys, uint64_t seed) {
  Rng rng(seed);
  Tensor total = scalar(0.0, Dtype::f64);
  for (const Tensor& y : ys) total = add(total, sum(mul(y, randn(y.shape(), rng, Dtype::f64))));
  return total;
}

TEST(Checkpoint, KeepsOnlyItsInputsAndGivesEveryTensorItReadItsGradient) {
  Rng rng(1);
  const Region f{randn({2, 4}, rng, Dtype::f64).set_requires_grad()};
  const Tensor x = randn({3, 2}, rng, Dtype::f64).set_requires_grad();
  const Tensor s = randn({3, 4}, rng, Dtype::f64).set_requires_grad();
  const std::vector<Tensor> plain = f({x, s});
  EXPECT_FALSE(f.intermediate->expired());  // the plain graph keeps tanh's output
  const std::vector<Tensor> kept = checkpoint(f, {x, s});
  EXPECT_TRUE(f.intermediate->expired());  // the checkpointed one does not
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].shape(), plain[0].shape());
  EXPECT_EQ(kept[1].shape(), plain[1].shape());
  EXPECT_TRUE(same_bits(kept[1], plain[1]));

  const std::vector<Tensor> want = grad({reduce(plain, 9)}, {x, s, f.W});
  const std::vector<Tensor> got = grad({reduce(kept, 9)}, {x, s, f.W});
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << i;

  // Against central differences, W included (it is not among checkpoint's inputs).
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const Region g{in[2]};
        return reduce(checkpoint(g, {in[0], in[1]}), 9);
      },
      {x, s, f.W});
  EXPECT_TRUE(r.passed) << r.message;
}

TEST(Checkpoint, NestedRegionsCreateGraphAndRetainGraph) {
  Rng rng(2);
  const Tensor W = randn({2, 4}, rng, Dtype::f64).set_requires_grad();
  const Tensor x = randn({3, 2}, rng, Dtype::f64).set_requires_grad();
  const Tensor s = randn({3, 4}, rng, Dtype::f64).set_requires_grad();
  const Region inner{W};
  // outer(x, s) = (y0 * y0, y1) of inner, in a checkpoint (and inner in one more inside it when
  // nested), or plain.
  const auto outer = [&](bool checkpointed, bool nested) {
    const CheckpointFn body = [&, nested](const std::vector<Tensor>& in) {
      const std::vector<Tensor> ys = nested ? checkpoint(inner, in) : inner(in);
      return std::vector<Tensor>{mul(ys[0], ys[0]), ys[1]};
    };
    return checkpointed ? checkpoint(body, {x, s}) : body({x, s});
  };
  const Tensor v = randn({3, 2}, rng, Dtype::f64);
  // The Hessian of the reduction along v (create_graph through the regions), in x and W.
  const auto hvp = [&](bool checkpointed, bool nested) {
    const Tensor loss = reduce(outer(checkpointed, nested), 4);
    const Tensor gx = grad({loss}, {x}, {}, true)[0];
    return grad({sum(mul(gx, v))}, {x, W});
  };
  const std::vector<Tensor> want = hvp(false, false), got = hvp(true, false), nested = hvp(true, true);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(same_bits(got[i], want[i])) << i << got[i] << want[i];
    // Nested, the inner region's two outputs are packed and split again inside the outer one:
    // the second derivative's graph has those nodes more, and sums some gradients in another
    // order (checkpoint.h). Equal to rounding.
    const std::vector<double> a = nested[i].to_vector(), b = want[i].to_vector();
    double largest = 0, diff = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      largest = std::max(largest, std::abs(b[k]));
      diff = std::max(diff, std::abs(a[k] - b[k]));
    }
    EXPECT_GT(largest, 1e-3) << i;  // not vacuous
    EXPECT_LE(diff, 1e-14 * largest) << i;
  }
  // Twice through one retained graph: the gradients of two backwards.
  const auto twice = [&](bool checkpointed) {
    for (const Tensor& t : {x, s, W}) t.zero_grad();
    const Tensor loss = reduce(outer(checkpointed, checkpointed), 5);
    loss.backward(Tensor(), true);
    loss.backward();
    return std::vector<Tensor>{x.grad().clone(), s.grad().clone(), W.grad().clone()};
  };
  const std::vector<Tensor> plain2 = twice(false), kept2 = twice(true);
  for (size_t i = 0; i < plain2.size(); ++i) EXPECT_TRUE(same_bits(kept2[i], plain2[i])) << i << kept2[i] << plain2[i];
  // Without retain_graph, a second backward is refused as for any freed graph.
  const Tensor loss = reduce(outer(true, true), 5);
  loss.backward();
  EXPECT_THROW(loss.backward(), GraphError);
}

TEST(Checkpoint, GradReadyTellsEachLeafOnceWithItsFinalGradient) {
  Rng rng(3);
  const Tensor W = randn({2, 4}, rng, Dtype::f64).set_requires_grad();
  const Tensor x = randn({3, 2}, rng, Dtype::f64).set_requires_grad();
  const Tensor s = randn({3, 4}, rng, Dtype::f64).set_requires_grad();
  const Region f{W};
  // W is read inside the region and again outside it: its gradient is final only after both.
  const Tensor loss = add(reduce(checkpoint(f, {x, s}), 6), sum(mul(W, W)));
  std::map<const TensorImpl*, std::vector<Tensor>> told;
  {
    GradReadyScope scope([&](const Tensor& leaf, const Tensor& g) { told[&leaf.impl()].push_back(g.clone()); });
    loss.backward();
  }
  ASSERT_EQ(told.size(), 3u);
  for (const Tensor& t : {x, s, W}) {
    ASSERT_EQ(told[&t.impl()].size(), 1u);
    EXPECT_TRUE(same_bits(told[&t.impl()][0], t.grad()));
  }
}

TEST(Checkpoint, WithoutGradModeOrGradItIsFnItself) {
  Rng rng(4);
  const Region f{randn({2, 4}, rng, Dtype::f64)};  // nothing requires grad
  const std::vector<Tensor> ys = checkpoint(f, {randn({3, 2}, rng, Dtype::f64), randn({3, 4}, rng, Dtype::f64)});
  EXPECT_FALSE(ys[0].requires_grad());
  const Region g{randn({2, 4}, rng, Dtype::f64).set_requires_grad()};
  NoGradGuard off;
  EXPECT_FALSE(checkpoint(g, {randn({3, 2}, rng, Dtype::f64), randn({3, 4}, rng, Dtype::f64)})[0].requires_grad());
}

TEST(Checkpoint, RefusesWhatWouldMakeTheRecomputationWrong) {
  Rng rng(5);
  const Tensor W = randn({2, 4}, rng, Dtype::f64).set_requires_grad();
  const Tensor x = randn({3, 2}, rng, Dtype::f64).set_requires_grad();
  const Tensor s = randn({3, 4}, rng, Dtype::f64);
  const Region f{W};
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // fn writing into its input.
  const Tensor s2 = s.clone();
  EXPECT_NE(message([&] {
              checkpoint([&](const std::vector<Tensor>& in) { Tensor t = in[1]; t.data<double>()[0] = 1; return f(in); }, {x, s2});
            }).find("fn wrote into its input 1, of shape (3, 4), in place"), std::string::npos);
  // An input changed in place between the forward and the backward.
  {
    const Tensor s3 = s.clone();
    const Tensor loss = reduce(checkpoint(f, {x, s3}), 1);
    Tensor(s3).set({0, 0}, 2.0);
    const std::string m = message([&] { loss.backward(); });
    EXPECT_NE(m.find("its input 1, of shape (3, 4), was modified in place since the forward"), std::string::npos) << m;
  }
  // A weight fn reads, changed in place (an optimizer step before the backward).
  {
    const Tensor W2 = W.detach().clone().set_requires_grad();
    const Tensor loss = reduce(checkpoint(Region{W2}, {x, s}), 1);
    Tensor(W2).set({1, 2}, 0.5);
    const std::string m = message([&] { loss.backward(); });
    EXPECT_NE(m.find("a tensor fn read, of shape (2, 4), was modified in place"), std::string::npos) << m;
  }
  // Dropout from an Rng checkpoint was not told of: other masks in the recomputation.
  {
    Rng drop(6);
    const CheckpointFn noisy = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{dropout(matmul(in[0], W), 0.5, true, drop)};
    };
    const std::string m = message([&] { reduce(checkpoint(noisy, {x}), 2).backward(); });
    EXPECT_NE(m.find("recomputing fn gave other values than its forward did"), std::string::npos) << m;
    // Told of it, the same masks: no error, and the gradient of the plain run.
    Rng again = drop;
    W.zero_grad();
    reduce(checkpoint(noisy, {x}, {.rngs = {&drop}}), 2).backward();
    const Tensor kept = W.grad().clone();
    W.zero_grad();
    drop = again;
    reduce(noisy({x}), 2).backward();
    EXPECT_TRUE(same_bits(kept, W.grad()));
  }
  // What fn returns, and what checkpoint is given.
  EXPECT_NE(message([&] { checkpoint(CheckpointFn([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }), {x}); })
                .find("fn returned no tensor"), std::string::npos);
  EXPECT_NE(message([&] {
              checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0], in[0].to(Dtype::f32)}; }, {x});
            }).find("fn's outputs are float64 and float32; several outputs must share a dtype"), std::string::npos);
  EXPECT_NE(message([&] { checkpoint(CheckpointFn(), {x}); }).find("fn is empty"), std::string::npos);
  EXPECT_NE(message([&] { checkpoint(f, {x, Tensor()}); }).find("input 1 is an undefined tensor"), std::string::npos);
  EXPECT_NE(message([&] { checkpoint(f, {x, s}, {.rngs = {nullptr}}); }).find("null Rng"), std::string::npos);
}

// What a review found: tg::grad with respect to a region's output (GPT block outputs), a cat of
// more inputs than a node holds as fn's only read, an Rng listed twice.
TEST(Checkpoint, GradOfTheOutputACatOfManyAndARepeatedRng) {
  Rng rng(7);
  const Tensor x = randn({3}, rng, Dtype::f64).set_requires_grad();
  const Tensor h = checkpoint([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x});
  const Tensor g = grad({sum(mul(h, h))}, {h, x})[0];
  const std::vector<double> hv = h.to_vector(), gv = g.to_vector();
  for (size_t i = 0; i < hv.size(); ++i) EXPECT_EQ(gv[i], 2 * hv[i]);

  std::vector<Tensor> xs;
  for (int i = 0; i < 9; ++i) xs.push_back(randn({2}, rng, Dtype::f64).set_requires_grad());
  const Tensor y = checkpoint([](const std::vector<Tensor>& in) { return cat(in, 0); }, xs);
  ASSERT_TRUE(y.requires_grad());
  sum(scale(y, 3.0)).backward();
  for (const Tensor& t : xs) EXPECT_EQ(t.grad().to_vector(), std::vector<double>({3, 3}));

  Rng r(1);
  const CheckpointFn drop = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{dropout(in[0], 0.5, true, r)};
  };
  const Tensor z = randn({16}, rng, Dtype::f64).set_requires_grad();
  const Tensor kept = checkpoint(drop, {z}, {.rngs = {&r, &r}})[0];
  Rng after = r;
  sum(kept).backward();
  EXPECT_EQ(r.uniform(0, 1), after.uniform(0, 1));  // the backward left r where the forward did
}

// The README's example ("Activation checkpointing"), as written there; then the plain MLP.
TEST(Checkpoint, TheReadmeExample) {
  using namespace tg;
  Rng rng(0);
  nn::GPTConfig config{.block_size = 256, .n_layer = 8, .n_head = 8, .n_embd = 256, .dropout = 0.1};
  config.checkpoint_blocks = true;  // every block under checkpoint, its dropout replayed
  nn::GPT gpt(config, rng);
  // A region of your own: an MLP whose 1024-wide hidden activations are not kept.
  nn::Linear fc1(256, 1024, true, rng), fc2(1024, 256, true, rng);
  Tensor x = randn({64, 256}, rng).set_requires_grad();
  Tensor y = checkpoint([&](const std::vector<Tensor>& in) { return fc2(gelu(fc1(in[0]))); }, {x});
  sum(y).backward();  // x, fc1 and fc2 get the plain run's gradients

  EXPECT_TRUE(gpt.config().checkpoint_blocks);
  std::vector<Tensor> kept = {x.grad().clone()};
  for (const Tensor& p : fc1.parameters()) kept.push_back(p.grad().clone());
  for (const Tensor& p : fc2.parameters()) kept.push_back(p.grad().clone());
  for (Tensor t : kept) ASSERT_TRUE(t.defined());
  x.zero_grad();
  for (const nn::Linear* l : {&fc1, &fc2})
    for (const Tensor& p : l->parameters()) p.zero_grad();
  sum(fc2(gelu(fc1(x)))).backward();
  std::vector<Tensor> plain = {x.grad()};
  for (const Tensor& p : fc1.parameters()) plain.push_back(p.grad());
  for (const Tensor& p : fc2.parameters()) plain.push_back(p.grad());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_TRUE(same_bits(kept[i], plain[i])) << i;
}

}  // namespace
}  // namespace tg
