// nn/: Module bookkeeping (names, state dicts, modes), the layers against plain loops, and the
// GPT: nanoGPT's parameter names and init, a gradcheck of the whole model's loss, and the
// KV-cache decoder against full forwards. The PyTorch comparison is in nn_torch_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/narrow.h>
#include "nn_util.h"

namespace tg::nn {
namespace {

using test::max_abs_diff;
using test::random_state;
using test::tiny;
using test::tokens;

std::vector<std::string> names_of(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

// nanoGPT's state_dict names of a 2-layer model, in its order.
std::vector<std::string> nanogpt_names(bool bias, bool attention_only) {
  std::vector<std::string> names = {"transformer.wte.weight", "transformer.wpe.weight"};
  const auto layer = [&](const std::string& prefix) {
    names.push_back(prefix + ".weight");
    if (bias) names.push_back(prefix + ".bias");
  };
  for (int i = 0; i < 2; ++i) {
    const std::string h = "transformer.h." + std::to_string(i);
    layer(h + ".ln_1");
    layer(h + ".attn.c_attn");
    layer(h + ".attn.c_proj");
    if (attention_only) continue;
    layer(h + ".ln_2");
    layer(h + ".mlp.c_fc");
    layer(h + ".mlp.c_proj");
  }
  layer("transformer.ln_f");
  return names;
}

TEST(Module, NamedParametersAreNanoGPTsStateDictNames) {
  for (const bool bias : {true, false}) {
    for (const bool attention_only : {false, true}) {
      SCOPED_TRACE("bias " + std::to_string(bias) + " attention_only " +
                   std::to_string(attention_only));
      Rng rng(1);
      GPT model(tiny(bias, attention_only), rng);
      EXPECT_EQ(names_of(model), nanogpt_names(bias, attention_only));
      for (const auto& [name, p] : model.named_parameters()) EXPECT_TRUE(p.requires_grad()) << name;
    }
  }
}

TEST(GPT, ShapesOfParametersLogitsAndLoss) {
  Rng rng(2);
  GPT model(tiny(), rng);
  std::map<std::string, std::string> shape;
  for (const auto& [name, p] : model.named_parameters()) shape[name] = p.shape().str();
  EXPECT_EQ(shape["transformer.wte.weight"], "(5, 4)");
  EXPECT_EQ(shape["transformer.wpe.weight"], "(4, 4)");
  EXPECT_EQ(shape["transformer.h.1.attn.c_attn.weight"], "(12, 4)");
  EXPECT_EQ(shape["transformer.h.1.attn.c_attn.bias"], "(12,)");
  EXPECT_EQ(shape["transformer.h.1.attn.c_proj.weight"], "(4, 4)");
  EXPECT_EQ(shape["transformer.h.1.mlp.c_fc.weight"], "(16, 4)");
  EXPECT_EQ(shape["transformer.h.1.mlp.c_proj.weight"], "(4, 16)");
  EXPECT_EQ(shape["transformer.ln_f.weight"], "(4,)");
  // wte 20 + wpe 16 + 2 blocks of (ln 8 + c_attn 60 + c_proj 20 + ln 8 + c_fc 80 + c_proj 68)
  // + ln_f 8
  EXPECT_EQ(model.num_parameters(), 20 + 16 + 2 * 244 + 8);
  const Tensor idx = tokens({0, 1, 2, 3, 4, 0}, 2, 3);
  EXPECT_EQ(model.forward(idx).shape().str(), "(2, 3, 5)");
  EXPECT_EQ(model.loss(idx, tokens({1, 2, 3, 4, 0, -1}, 2, 3)).rank(), 0);
}

TEST(GPT, BadInputsNameTheProblem) {
  Rng rng(3);
  GPT model(tiny(), rng);
  try {
    model.forward(tokens({0, 1, 2, 3, 4}, 1, 5));
    ADD_FAILURE() << "T > block_size accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block_size 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model.forward(from_indices({0, 1}, {2})), ShapeError);
  EXPECT_THROW(model.loss(tokens({0, 1}, 1, 2), tokens({0, 1, 2}, 1, 3)), ShapeError);
  GPTConfig bad = tiny();
  bad.n_head = 3;
  EXPECT_THROW(GPT(bad, rng), ValueError);
}

// Sample standard deviation of a tensor's entries.
double stddev(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  double mean = 0, sq = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / (v.size() - 1));
}

TEST(GPT, InitIsNanoGPTs) {
  GPTConfig c = tiny();
  c.n_embd = 64;
  c.vocab_size = 64;
  c.block_size = 64;
  c.n_head = 4;
  c.n_layer = 8;
  Rng rng(4);
  GPT model(c, rng);
  const double proj_std = 0.02 / std::sqrt(2.0 * c.n_layer);  // 0.005
  for (const auto& [name, p] : model.named_parameters()) {
    SCOPED_TRACE(name);
    const bool is_ln = name.find("ln_") != std::string::npos;
    const bool is_bias = name.ends_with(".bias");
    if (is_bias || is_ln) {
      const double want = is_bias ? 0.0 : 1.0;
      for (double x : p.to_vector()) ASSERT_EQ(x, want);
      continue;
    }
    const double want = name.ends_with("c_proj.weight") ? proj_std : 0.02;
    EXPECT_NEAR(stddev(p), want, 0.1 * want);  // >= 4096 draws: the sample std is within 2%
  }
}

TEST(Module, StateDictSharesTheParametersAndLoadsRoundTrip) {
  Rng rng_a(5), rng_b(6);
  GPT a(tiny(), rng_a), b(tiny(), rng_b);
  const Tensor idx = tokens({0, 1, 2, 3, 4, 3, 2, 1}, 2, 4);
  EXPECT_GT(max_abs_diff(a.forward(idx), b.forward(idx)), 1e-3);
  const NamedTensors state = a.state_dict();
  EXPECT_EQ(state[0].second.impl_ptr(), a.named_parameters()[0].second.impl_ptr());
  const uint64_t version = b.parameters()[0].version();
  b.load_state_dict(state);
  EXPECT_GT(b.parameters()[0].version(), version);
  EXPECT_NE(b.parameters()[0].impl_ptr(), a.parameters()[0].impl_ptr());  // copied, not shared
  EXPECT_EQ(max_abs_diff(a.forward(idx), b.forward(idx)), 0.0);
}

TEST(Module, LoadStateDictIsStrict) {
  Rng rng(7);
  GPT model(tiny(), rng);
  const NamedTensors good = model.state_dict();
  std::vector<Tensor> before;
  for (const auto& [name, p] : good) before.push_back(p.clone());
  struct Row {
    std::string name;
    NamedTensors state;
    std::string fragment;
  };
  std::vector<Row> rows;
  NamedTensors s = good;
  s.erase(s.begin() + 3);
  rows.push_back({"missing", s, "missing entry '" + good[3].first + "'"});
  s = good;
  s.emplace_back("lm_head.weight", good[0].second);
  rows.push_back({"unexpected", s, "unexpected entry 'lm_head.weight'"});
  s = good;  // a name from a file with a control byte (the fuzzer's find): shown as \x7f
  s.emplace_back("lm_head.\x7f" "eight", good[0].second);
  rows.push_back({"unprintable", s, "unexpected entry 'lm_head.\\x7feight'"});
  s = good;
  s[1].second = zeros({3, 4}, Dtype::f64);
  rows.push_back({"misshapen", s, "'transformer.wpe.weight' is (3, 4) float64"});
  s = good;
  s[0].second = good[0].second.to(Dtype::f32);
  rows.push_back({"dtype", s, "'transformer.wte.weight' is (5, 4) float32"});
  s = good;
  s.push_back(good[2]);
  rows.push_back({"repeated", s, "appears twice"});
  for (Row& row : rows) {
    SCOPED_TRACE(row.name);
    for (auto& [name, t] : row.state)
      if (t.defined()) t = zeros(t.shape(), t.dtype());  // would change the model if copied
    try {
      model.load_state_dict(row.state);
      ADD_FAILURE() << "accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(row.fragment), std::string::npos) << e.what();
    }
    const std::vector<Tensor> now = model.parameters();
    for (size_t i = 0; i < now.size(); ++i) EXPECT_EQ(max_abs_diff(now[i], before[i]), 0.0);
  }
}

TEST(Module, TrainAndEvalToggleDropout) {
  GPTConfig c = tiny();
  c.dropout = 0.5;
  Rng rng(8), rng_plain(8);
  GPT model(c, rng);
  GPTConfig c0 = c;
  c0.dropout = 0.0;
  GPT plain(c0, rng_plain);  // the same weights, no dropout
  const Tensor idx = tokens({0, 1, 2, 3, 4, 3, 2, 1}, 2, 4);
  EXPECT_TRUE(model.is_training());
  const Tensor t1 = model.forward(idx), t2 = model.forward(idx);
  EXPECT_GT(max_abs_diff(t1, t2), 1e-6);  // fresh masks each call
  EXPECT_GT(max_abs_diff(t1, plain.forward(idx)), 1e-6);
  model.eval();
  EXPECT_FALSE(model.is_training());
  EXPECT_FALSE(model.transformer.h[1].mlp->dropout.is_training());
  EXPECT_EQ(max_abs_diff(model.forward(idx), plain.forward(idx)), 0.0);
  model.train();
  model.set_seed(11);
  const Tensor s1 = model.forward(idx);
  model.set_seed(11);
  EXPECT_EQ(max_abs_diff(s1, model.forward(idx)), 0.0);  // seeded: reproducible
}

TEST(Linear, EqualsXWTransposedPlusBByLoops) {
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    Rng rng(9);
    Linear layer(3, 5, bias, rng, Dtype::f64, 0.5);
    if (bias) layer.bias = randn({5}, rng, Dtype::f64);
    const Tensor x = randn({2, 4, 3}, rng, Dtype::f64);
    const Tensor y = layer(x);
    ASSERT_EQ(y.shape().str(), "(2, 4, 5)");
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t o = 0; o < 5; ++o) {
          double want = bias ? layer.bias.at({o}) : 0.0;
          for (int64_t i = 0; i < 3; ++i) want += x.at({b, t, i}) * layer.weight.at({o, i});
          EXPECT_NEAR(y.at({b, t, o}), want, 1e-14);
        }
    EXPECT_THROW(layer(randn({2, 4}, rng, Dtype::f64)), ShapeError);
  }
}

TEST(GPT, GradcheckOfTheLossInEveryParameter) {
  struct Case {
    std::string name;
    GPTConfig config;
  };
  GPTConfig erf = tiny(false, false);
  erf.gelu = GeluKind::erf;
  for (const Case& c : {Case{"tanh, bias", tiny()}, Case{"erf, no bias", erf},
                        Case{"attention only", tiny(true, true)}}) {
    SCOPED_TRACE(c.name);
    Rng rng(10);
    GPT model(c.config, rng);
    const NamedTensors state = random_state(model, rng);
    const Tensor idx = tokens({0, 3, 1, 4, 2, 2, 0, 1}, 2, 4);
    const Tensor targets = tokens({3, 1, 4, -1, 2, 0, 1, 3}, 2, 4);
    const GradcheckResult r =
        test::gradcheck_every_parameter(model, state, [&] { return model.loss(idx, targets); });
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_FALSE(r.vacuous);
  }
}

TEST(GPT, CachedGreedyDecodingEqualsFullForwards) {
  GPTConfig c = tiny();
  c.block_size = 8;
  Rng rng(12);
  GPT model(c, rng);
  model.load_state_dict(random_state(model, rng));
  model.eval();
  std::vector<std::vector<int64_t>> seqs = {{1, 4}, {3, 0}};  // B = 2 prompts
  KVCache cache;
  Tensor step_logits = model.forward_cached(tokens({1, 4, 3, 0}, 2, 2), cache);  // (2, 2, V)
  for (;;) {
    const int64_t T = cache.length();
    std::vector<int64_t> flat;
    for (const auto& s : seqs) flat.insert(flat.end(), s.begin(), s.end());
    const Tensor full = model.forward(tokens(flat, 2, T));  // (2, T, V)
    const int64_t T_new = step_logits.size(1);
    // Near, not equal: the cache's attention (T_new query rows after the cached keys) and the
    // full forward's (all T rows at once) group the same sums into other products.
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < T_new; ++t)
        for (int64_t v = 0; v < c.vocab_size; ++v)
          ASSERT_NEAR(step_logits.at({b, t, v}), full.at({b, T - T_new + t, v}), 1e-9)
              << "T " << T << " b " << b << " t " << t;
    if (T == c.block_size) break;
    std::vector<int64_t> next;
    for (int64_t b = 0; b < 2; ++b) {
      int64_t best = 0;  // greedy: the argmax of the last row
      for (int64_t v = 1; v < c.vocab_size; ++v)
        if (step_logits.at({b, T_new - 1, v}) > step_logits.at({b, T_new - 1, best})) best = v;
      seqs[b].push_back(best);
      next.push_back(best);
    }
    step_logits = model.forward_cached(tokens(next, 2, 1), cache);  // (2, 1, V)
    EXPECT_FALSE(step_logits.requires_grad());
  }
  EXPECT_EQ(cache.length(), c.block_size);
  EXPECT_THROW(model.forward_cached(tokens({0, 0}, 2, 1), cache), ValueError);
}

// Chunks of several new positions after the cached ones (the fused attention with its mask
// shifted by the cache's length) give the rows of one full forward, in float32 too.
TEST(GPT, CachedChunksEqualOneFullForward) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    GPTConfig c = tiny();
    c.block_size = 8;
    c.dtype = dtype;
    Rng rng(21);
    GPT model(c, rng);
    model.eval();
    const std::vector<int64_t> seq = {1, 4, 3, 0, 2, 2, 4, 1, 0, 3, 1, 1, 2, 4, 0, 3};  // (2, 8)
    const Tensor full = model.forward(tokens(seq, 2, 8));                         // (2, 8, V)
    KVCache cache;
    int64_t start = 0;
    for (int64_t T_new : {3, 2, 1, 2}) {
      std::vector<int64_t> chunk;
      for (int64_t b = 0; b < 2; ++b)
        chunk.insert(chunk.end(), seq.begin() + b * 8 + start, seq.begin() + b * 8 + start + T_new);
      const Tensor step = model.forward_cached(tokens(chunk, 2, T_new), cache);  // (2, T_new, V)
      const Tensor rows = narrow(full, 1, start, T_new);
      EXPECT_LE(max_abs_diff(step, rows), dtype == Dtype::f64 ? 1e-12 : 1e-5)
          << "positions " << start << ".." << start + T_new - 1;
      start += T_new;
    }
    EXPECT_EQ(cache.length(), 8);
  }
}

}  // namespace
}  // namespace tg::nn
