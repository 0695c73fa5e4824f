// tg::StaticStep (autograd/static_step.h): a replayed training step gives the eager step's
// losses and parameters bit for bit (GPT and the MNIST net with dropout, Llama, an LSTM, every op
// of the list; float32 and float64; AdamW updating the parameters in place between steps), runs
// on the recorded nodes, and refuses what would make a replay wrong, naming it.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/static_step.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/image_classifiers.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/llama.h>
#include <tapegrad/nn/rnn.h>
#include <tapegrad/ops/op_list.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/optim/adamw.h>

namespace tg {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.impl().storage->data(), b.impl().storage->data(),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

Tensor sq(const Tensor& t) { return mul(t, t); }

// The README's example ("A static step, recorded once and replayed"), shown there verbatim: the
// code between this test's README markers, unindented by 2.
TEST(StaticStep, TheReadmeExampleRunsAndIsShownVerbatim) {
  // README static_step
  Rng rng(0);
  nn::GPT gpt(nn::GPTConfig{.block_size = 16, .n_layer = 2, .n_embd = 32}, rng);
  optim::AdamW opt(gpt.named_parameters(), 1e-3);
  StaticStep step([&](const std::vector<Tensor>& in) { return gpt.loss(in[0], in[1]); });
  std::vector<double> losses;
  for (int s = 0; s < 20; ++s) {
    const Tensor x = randint(0, 65, {4, 16}, rng), y = randint(0, 65, {4, 16}, rng);
    losses.push_back(step({x, y}).item());  // and the gradients are in the parameters' .grad()
    opt.step();
    opt.zero_grad();
  }
  // README end
  EXPECT_EQ(step.replays(), 18);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l) && l > 3 && l < 5) << l;  // ~ log(65)
  EXPECT_NE(losses[2], losses[3]);

  std::ifstream self(TAPEGRAD_STATIC_STEP_TEST_CPP), readme(TAPEGRAD_README_MD);
  std::string code, line;
  bool inside = false;
  while (std::getline(self, line)) {
    if (inside && line == "  // README end") break;
    if (inside) code += line.substr(std::min<std::size_t>(2, line.size())) + "\n";
    if (line == "  // README static_step") inside = true;
  }
  ASSERT_GT(code.size(), 300u);
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find("```cpp\n" + code + "```"), std::string::npos)
      << "README.md does not show the example verbatim:\n" << code;
}

// A model to train: its parameters, its loss on a batch, and step s's batch.
struct Case {
  std::shared_ptr<nn::Module> model;
  StaticStep::Fn loss;
  std::function<std::vector<Tensor>(int)> batch;
};

struct Trained {
  std::vector<Tensor> losses;
  std::vector<Tensor> params;
};

// `steps` AdamW updates, each step eager (loss = fn(batch); loss.backward()) or a StaticStep's.
Trained train(const Case& c, bool replayed, int steps) {
  optim::AdamW opt(c.model->named_parameters(), 1e-2);
  StaticStep step(c.loss);
  Trained out;
  for (int s = 0; s < steps; ++s) {
    const std::vector<Tensor> inputs = c.batch(s);
    Tensor loss;
    if (replayed) {
      loss = step(inputs);
    } else {
      loss = c.loss(inputs);
      loss.backward();
      loss = loss.detach();
    }
    out.losses.push_back(loss);
    opt.step();
    opt.zero_grad();
  }
  if (replayed) {
    EXPECT_EQ(step.replays(), steps - 2);  // the first runs eagerly, the second records
  }
  for (const Tensor& p : c.model->parameters()) out.params.push_back(p.detach().clone());
  return out;
}

void expect_same(const Trained& a, const Trained& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s)
    EXPECT_TRUE(same_bits(a.losses[s], b.losses[s]))
        << "step " << s << ": " << a.losses[s].item() << " vs " << b.losses[s].item();
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(same_bits(a.params[i], b.params[i])) << i;
}

// Replayed and eager from the same weights agree bit for bit; the negative control: the batches
// differ from step to step and so do the losses (a replay that kept the recorded step's inputs
// or values would not agree).
void expect_replay_is_eager(const std::function<Case()>& make, int steps = 5) {
  const Trained eager = train(make(), false, steps);
  const Trained replayed = train(make(), true, steps);
  expect_same(replayed, eager);
  for (int s = 3; s < steps; ++s)
    EXPECT_FALSE(same_bits(eager.losses[s], eager.losses[2])) << "step " << s;
}

Tensor tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Rng rng(seed);
  return randint(0, V, {B, T}, rng);
}

Case gpt_case(Dtype dtype) {
  nn::GPTConfig c{.vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                  .dropout = 0.1, .dtype = dtype};
  Rng init(3);
  auto model = std::make_shared<nn::GPT>(c, init);
  model->set_seed(5);
  return {model, [model](const std::vector<Tensor>& in) { return model->loss(in[0], in[1]); },
          [](int s) {
            return std::vector<Tensor>{tokens(3, 8, 13, 10 + s), tokens(3, 8, 13, 50 + s)};
          }};
}

TEST(StaticStep, GptStepsAreTheEagerStepsBitForBitWithDropout) {
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    expect_replay_is_eager([dtype] { return gpt_case(dtype); });
  }
}

TEST(StaticStep, LlamaStepsAreTheEagerStepsBitForBit) {
  expect_replay_is_eager([] {
    nn::LlamaConfig c{.vocab_size = 17, .hidden_size = 16, .intermediate_size = 24,
                      .num_hidden_layers = 2, .num_attention_heads = 4, .num_key_value_heads = 2,
                      .max_position_embeddings = 8, .dtype = Dtype::f32};
    Rng init(4);
    auto model = std::make_shared<nn::Llama>(c, init);
    return Case{model,
                [model](const std::vector<Tensor>& in) { return model->loss(in[0], in[1]); },
                [](int s) {
                  return std::vector<Tensor>{tokens(2, 8, 17, 20 + s), tokens(2, 8, 17, 60 + s)};
                }};
  });
}

TEST(StaticStep, MnistNetStepsAreTheEagerStepsBitForBitWithDropout) {
  expect_replay_is_eager([] {
    Rng init(6);
    auto model = std::make_shared<nn::MnistNet>(nn::MnistNetConfig{}, init);
    model->dropout_rng() = Rng(8);
    return Case{model,
                [model](const std::vector<Tensor>& in) {
                  return cross_entropy(model->forward(in[0]), in[1]);
                },
                [](int s) {
                  Rng rng(100 + s);
                  return std::vector<Tensor>{randn({4, 1, 28, 28}, rng, Dtype::f32),
                                             randint(0, 10, {4}, rng)};
                }};
  }, 4);
}

TEST(StaticStep, LstmStepsAreTheEagerStepsBitForBit) {
  expect_replay_is_eager([] {
    Rng init(9);
    auto model = std::make_shared<nn::LSTM>(3, 5, init, nn::RNNOptions{}, Dtype::f64);
    return Case{model,
                [model](const std::vector<Tensor>& in) {
                  return mse_loss(model->forward(in[0]).output, in[1]);
                },
                [](int s) {
                  Rng rng(200 + s);
                  return std::vector<Tensor>{randn({6, 2, 3}, rng, Dtype::f64),
                                             randn({6, 2, 5}, rng, Dtype::f64)};
                }};
  });
}

// Every op of the list, replayed on new data each call: the loss and the gradients are the eager
// ones (an op whose derivative kept state of the recorded call, not of this one, would differ).
TEST(StaticStep, EveryOpReplayedGivesTheEagerGradients) {
  for (const OpInfo& op : op_list_small()) {
    SCOPED_TRACE(op.name);
    Rng rng(11);
    std::vector<Tensor> params, weights_of_out;
    for (const Shape& s : op.sample_shapes)
      params.push_back(randn(s, rng, Dtype::f64).set_requires_grad());
    Tensor weights;
    auto fn = [&](const std::vector<Tensor>& data) {
      std::vector<Tensor> xs;
      for (std::size_t i = 0; i < params.size(); ++i)
        xs.push_back(in_domain(op, add(params[i], data[i])));
      const Tensor y = op.call(xs);
      if (!weights.defined()) {
        Rng w(12);
        weights = randn(y.shape(), w, y.dtype());
      }
      return sum(mul(y, weights));
    };
    StaticStep step(fn);
    for (uint64_t call = 0; call < 4; ++call) {
      Rng d(100 + call);
      std::vector<Tensor> data;
      for (const Shape& s : op.sample_shapes) data.push_back(randn(s, d, Dtype::f64, 0.3));
      // Each backward starts from no .grad() (into a zeroed one, 0 + -0 would give +0).
      for (Tensor& p : params) p.set_grad(Tensor());
      const Tensor loss = step(data);
      std::vector<Tensor> grads;
      for (Tensor& p : params) grads.push_back(p.grad().clone());
      for (Tensor& p : params) p.set_grad(Tensor());
      const Tensor eager = fn(data);
      eager.backward();
      EXPECT_TRUE(same_bits(loss, eager.detach())) << "call " << call;
      for (std::size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(same_bits(grads[i], params[i].grad())) << "call " << call << ", input " << i;
    }
    EXPECT_EQ(step.replays(), 2);
  }
}

// A small model of plain ops for the tests below: loss = sum((tanh(x W) - y)^2).
struct Small {
  Tensor W;
  Small() {
    Rng rng(1);
    W = randn({3, 4}, rng, Dtype::f64).set_requires_grad();
  }
  std::vector<Tensor> batch(uint64_t seed) const {
    Rng rng(seed);
    return {randn({2, 3}, rng, Dtype::f64), randn({2, 4}, rng, Dtype::f64)};
  }
};

// Runs step on batches 0 and 1 (eager, recorded) and returns the message of the GraphError the
// first replay, on batch 2, throws ("" and a failure when none).
std::string first_replay_error(StaticStep& step, const Small& m) {
  step(m.batch(0));
  step(m.batch(1));
  try {
    step(m.batch(2));
  } catch (const GraphError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the first replay threw no GraphError";
  return "";
}

TEST(StaticStep, AReplayRunsOnTheRecordedNodesAndKeepsEarlierCallsTensors) {
  Small m;
  std::vector<std::weak_ptr<Node>> nodes;
  std::vector<Tensor> hs;  // fn's tensors, kept by its caller
  StaticStep step([&](const std::vector<Tensor>& in) {
    const Tensor h = tanh(matmul(in[0], m.W));  // tanh's backward reads its output
    nodes.push_back(h.impl().grad_fn);
    hs.push_back(h.detach());  // its buffer, off the tape
    return sum(sq(sub(h, in[1])));
  });
  for (uint64_t s = 0; s < 4; ++s) {
    m.W.zero_grad();
    step(m.batch(s));
  }
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_TRUE(step.recorded());
  EXPECT_EQ(step.replays(), 2);
  // The first call's graph is gone; the second's is kept and is what the replays ran on.
  EXPECT_TRUE(nodes[0].expired());
  for (int k : {2, 3}) {
    EXPECT_FALSE(nodes[k].expired());
    EXPECT_EQ(nodes[k].lock(), nodes[1].lock()) << k;
  }
  // Each call's h is its own: a later call did not write over an earlier one's.
  for (uint64_t s = 0; s < 4; ++s) {
    const NoGradGuard off;
    EXPECT_TRUE(same_bits(hs[s], tanh(matmul(m.batch(s)[0], m.W)))) << s;
  }
  // reset() drops it: the next call records a new one.
  hs.clear();
  step.reset();
  EXPECT_FALSE(step.recorded());
  EXPECT_TRUE(nodes[1].expired());
  step(m.batch(9));
  EXPECT_TRUE(step.recorded());
}

TEST(StaticStep, TheGradientsAreTheEagerOnesOnEachCallsData) {
  Small m;
  auto fn = [&](const std::vector<Tensor>& in) {
    return sum(sq(sub(tanh(matmul(in[0], m.W)), in[1])));
  };
  StaticStep step(fn);
  for (uint64_t s = 0; s < 5; ++s) {
    m.W.zero_grad();
    const Tensor loss = step(m.batch(s));
    const Tensor g = m.W.grad().clone();
    m.W.zero_grad();
    const Tensor eager = fn(m.batch(s));
    eager.backward();
    EXPECT_TRUE(same_bits(loss, eager.detach())) << s;
    EXPECT_TRUE(same_bits(g, m.W.grad())) << s;
    EXPECT_FALSE(loss.requires_grad());
  }
}

TEST(StaticStep, AnInputOfAnotherShapeOrDtypeIsRefusedNamingIt) {
  Small m;
  StaticStep step([&](const std::vector<Tensor>& in) {
    return sum(sq(sub(tanh(matmul(in[0], m.W)), in[1])));
  });
  step(m.batch(0));
  step(m.batch(1));
  Rng rng(3);
  const std::vector<Tensor> wider{randn({5, 3}, rng, Dtype::f64), randn({5, 4}, rng, Dtype::f64)};
  EXPECT_FALSE(step.fits(wider));
  EXPECT_TRUE(step.fits(m.batch(2)));
  try {
    step(wider);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("input 0 is (5, 3) float64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(2, 3) float64"), std::string::npos) << msg;
  }
  const std::vector<Tensor> floats{m.batch(2)[0].to(Dtype::f32), m.batch(2)[1]};
  EXPECT_THROW(step(floats), ShapeError);
  EXPECT_THROW(step({m.batch(2)[0]}), ShapeError);
  // The recorded step is kept through those: the next call replays.
  step(m.batch(3));
  EXPECT_EQ(step.replays(), 1);
  std::vector<Tensor> needs_grad = m.batch(4);
  needs_grad[0].set_requires_grad();
  EXPECT_THROW(step(needs_grad), ValueError);
}

TEST(StaticStep, AStepThatRunsOtherOpsIsRefusedNamingTheOpAndRecordedAgain) {
  Small m;
  int call = 0;
  StaticStep step([&](const std::vector<Tensor>& in) {
    const Tensor h = matmul(in[0], m.W);
    const Tensor a = ++call == 3 ? sigmoid(h) : tanh(h);  // the third call branches
    return sum(sq(sub(a, in[1])));
  });
  const std::string msg = first_replay_error(step, m);
  EXPECT_NE(msg.find("'sigmoid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'tanh'"), std::string::npos) << msg;
  EXPECT_FALSE(step.recorded());
  // The next call records again, and its gradient is the eager one.
  m.W.zero_grad();
  step(m.batch(3));
  EXPECT_TRUE(step.recorded());
  const Tensor g = m.W.grad().clone();
  m.W.zero_grad();
  sum(sq(sub(tanh(matmul(m.batch(3)[0], m.W)), m.batch(3)[1]))).backward();
  EXPECT_TRUE(same_bits(g, m.W.grad()));
}

// What is not on the tape may differ between calls (a kernel's scratch follows the free cores;
// here a constant's size): the graph is the same, and so are the eager numbers.
TEST(StaticStep, AConstantOfAnotherSizeReplaysAsEagerly) {
  Small m;
  int call = 0;
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor c = call % 2 ? full({3, 3}, 1.0, Dtype::f64) : full({2, 2}, 1.0, Dtype::f64);
    return add(sum(sq(sub(tanh(matmul(in[0], m.W)), in[1]))), sum(c));
  };
  StaticStep step(fn);
  for (uint64_t s = 0; s < 4; ++s, ++call) {
    m.W.set_grad(Tensor());
    const Tensor loss = step(m.batch(s));
    const Tensor g = m.W.grad().clone();
    m.W.set_grad(Tensor());
    const Tensor eager = fn(m.batch(s));
    eager.backward();
    EXPECT_TRUE(same_bits(loss, eager.detach())) << s;
    EXPECT_TRUE(same_bits(g, m.W.grad())) << s;
  }
  EXPECT_EQ(step.replays(), 2);
}

// fn throwing in the middle of a replay: the error comes out, the recorded step is dropped (half
// its nodes filled in by this call), and the next call records again with the eager gradient.
TEST(StaticStep, AnErrorInsideAReplayDropsTheRecordedStep) {
  Small m;
  int call = 0;
  auto loss_of = [&](const std::vector<Tensor>& in) {
    const Tensor h = tanh(matmul(in[0], m.W));
    if (++call == 3) throw ValueError("fn failed");
    return sum(sq(sub(h, in[1])));
  };
  StaticStep step(loss_of);
  step(m.batch(0));
  step(m.batch(1));
  EXPECT_THROW(step(m.batch(2)), ValueError);
  EXPECT_FALSE(step.recorded());
  step(m.batch(3));
  m.W.set_grad(Tensor());
  step(m.batch(4));
  EXPECT_EQ(step.replays(), 1);
  const Tensor g = m.W.grad().clone();
  m.W.set_grad(Tensor());
  loss_of(m.batch(4)).backward();
  EXPECT_TRUE(same_bits(g, m.W.grad()));
}

// A hook put, between calls, on a tensor fn made runs in no later call (an eager step's node is
// another each call); a backward through such a tensor without retain_graph frees what the
// recorded node held, and the next replay fills it in again.
TEST(StaticStep, WhatIsDoneToFnsTensorsBetweenCallsDoesNotCarryOver) {
  Small m;
  Tensor kept;
  auto eager_loss = [&](const std::vector<Tensor>& in) {
    return sum(sq(sub(tanh(matmul(in[0], m.W)), in[1])));
  };
  StaticStep step([&](const std::vector<Tensor>& in) {
    kept = tanh(matmul(in[0], m.W));
    return sum(sq(sub(kept, in[1])));
  });
  step(m.batch(0));
  step(m.batch(1));
  for (uint64_t s = 2; s < 5; ++s) {
    kept.register_hook([](const Tensor& g) { return mul(g, zeros_like(g)); });
    if (s == 3) sum(kept).backward();  // through the recorded nodes, which it releases
    m.W.set_grad(Tensor());
    step(m.batch(s));
    const Tensor g = m.W.grad().clone();
    m.W.set_grad(Tensor());
    eager_loss(m.batch(s)).backward();
    EXPECT_TRUE(same_bits(g, m.W.grad())) << s;
    EXPECT_GT(sum(abs(g)).item(), 0) << s;
  }
  EXPECT_EQ(step.replays(), 3);
}

TEST(StaticStep, AWriteInPlaceToASavedTensorInsideFnIsStillCaught) {
  Small m;
  int call = 0;
  StaticStep step([&](const std::vector<Tensor>& in) {
    Tensor e = exp(matmul(in[0], m.W));
    const Tensor loss = sum(mul(e, in[1]));  // mul saves e
    if (++call == 3) e.data<double>()[0] += 1.0;  // on the first replay only
    return loss;
  });
  const std::string msg = first_replay_error(step, m);
  EXPECT_NE(msg.find("modified in place"), std::string::npos) << msg;
}

TEST(StaticStep, WhatWouldBreakAReplayIsRefused) {
  Small m;
  auto loss_of = [&](const std::vector<Tensor>& in) {
    return sum(sq(sub(tanh(matmul(in[0], m.W)), in[1])));
  };
  // The refusals hold while recording (the second call) and replaying alike.
  for (auto body : std::vector<std::function<Tensor(const std::vector<Tensor>&)>>{
           [&](const std::vector<Tensor>& in) {
             const Tensor l = loss_of(in);
             l.register_hook([](const Tensor& g) { return g; });
             return l;
           },
           [&](const std::vector<Tensor>& in) {
             const Tensor l = loss_of(in);
             l.backward(Tensor(), true);
             return l;
           },
           [&](const std::vector<Tensor>& in) {
             return checkpoint([&](const std::vector<Tensor>& x) { return loss_of(x); }, in);
           }}) {
    int call = 0;
    StaticStep step([&](const std::vector<Tensor>& in) {
      return ++call == 1 ? loss_of(in) : body(in);
    });
    step(m.batch(0));
    try {
      step(m.batch(1));
      FAIL() << "no error";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("inside a StaticStep's fn"), std::string::npos)
          << e.what();
    }
  }
  StaticStep step(loss_of);
  {
    const NoGradGuard off;
    EXPECT_THROW(step(m.batch(0)), GraphError);
  }
  {
    const fwad::DualLevel level;
    EXPECT_THROW(step(m.batch(0)), GraphError);
  }
  // Called inside another step's fn; and a loss fn did not make (a leaf).
  StaticStep outer([&](const std::vector<Tensor>& in) { return step(in); });
  EXPECT_THROW(outer(m.batch(0)), GraphError);
  const Tensor scalar = full({}, 1.0, Dtype::f64).set_requires_grad();
  StaticStep leaf([&](const std::vector<Tensor>&) { return scalar; });
  leaf(m.batch(0));
  EXPECT_THROW(leaf(m.batch(0)), GraphError);
  EXPECT_THROW(StaticStep(nullptr), ValueError);
}

}  // namespace
}  // namespace tg
