// The Llama (nn/llama.h): Hugging Face's names and init, RoPE (tg::rotary on rope_tables)
// against its formula and its relative-position property, grouped-query attention against a model with the key/value heads
// written out, a gradcheck of the loss in every parameter, KV-cache decoding equal to full
// forwards, config.json and from_pretrained, and bad configs and inputs named.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/io/file_util.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/llama.h>
#include <tapegrad/nn/llama_config.h>
#include <tapegrad/ops/ops.h>
#include "nn_util.h"
#include "test_util.h"

namespace tg::nn {
namespace {

using test::max_abs_diff;
using test::names;
using test::random_state;
using test::tokens;

LlamaConfig tiny_llama(int64_t kv_heads = 2, bool tie = false) {
  return {.vocab_size = 7, .hidden_size = 8, .intermediate_size = 12, .num_hidden_layers = 2,
          .num_attention_heads = 4, .num_key_value_heads = kv_heads,
          .max_position_embeddings = 8, .tie_word_embeddings = tie, .dtype = Dtype::f64};
}

TEST(Llama, HuggingFaceNamesAndShapes) {
  Rng rng(1);
  Llama model(tiny_llama(), rng);
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s :
         {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      want.push_back(p + s);
  }
  want.push_back("model.norm.weight");
  want.push_back("lm_head.weight");
  EXPECT_EQ(names(model.state_dict()), want);
  // head_dim 2: q 4 heads, k and v 2 heads
  EXPECT_EQ(model.model.layers[0].self_attn.q_proj.weight.shape(), Shape({8, 8}));
  EXPECT_EQ(model.model.layers[0].self_attn.k_proj.weight.shape(), Shape({4, 8}));
  EXPECT_EQ(model.model.layers[0].self_attn.v_proj.weight.shape(), Shape({4, 8}));
  EXPECT_EQ(model.model.layers[0].mlp.gate_proj.weight.shape(), Shape({12, 8}));
  EXPECT_EQ(model.model.layers[0].mlp.down_proj.weight.shape(), Shape({8, 12}));
  EXPECT_EQ(model.lm_head->weight.shape(), Shape({7, 8}));
  const Tensor logits = model.forward(tokens({0, 6, 2, 3, 1, 5}, 2, 3));
  EXPECT_EQ(logits.shape(), Shape({2, 3, 7}));

  Llama tied(tiny_llama(2, true), rng);
  EXPECT_EQ(tied.lm_head, nullptr);
  want.pop_back();
  EXPECT_EQ(names(tied.state_dict()), want);
}

TEST(Llama, InitIsHuggingFaces) {
  LlamaConfig c = tiny_llama();
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.vocab_size = 50;
  Rng rng(2);
  Llama model(c, rng);
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<double> v = p.to_vector();
    if (name.find("norm") != std::string::npos) {
      for (double x : v) ASSERT_EQ(x, 1.0) << name;
      continue;
    }
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    const double n = static_cast<double>(v.size());
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 4 * 0.02 / std::sqrt(n)) << name;
    EXPECT_NEAR(sd, 0.02, 0.02 * 5 / std::sqrt(n)) << name;
  }
  // Drawn in named_parameters() order: the same seed gives the same model, another another.
  Rng same(2), other(3);
  Llama again(c, same), different(c, other);
  EXPECT_EQ(max_abs_diff(again.model.embed_tokens.weight, model.model.embed_tokens.weight), 0);
  EXPECT_EQ(max_abs_diff(again.lm_head->weight, model.lm_head->weight), 0);
  EXPECT_GT(max_abs_diff(different.lm_head->weight, model.lm_head->weight), 0);
}

TEST(Llama, RopeTablesFollowTheHalfSplitFormula) {
  const int64_t d = 6, start = 3, T = 4;
  const double theta = 500.0;
  const std::vector<Tensor> t = rope_tables(start, T, d, theta, Dtype::f64);
  ASSERT_EQ(t[0].shape(), Shape({T, d / 2}));
  Rng rng(4);
  const Tensor x = randn({1, T, 2, d}, rng, Dtype::f64);  // (B, T, H, d)
  const Tensor y = rotary(x, t[0], t[1]);
  for (int64_t m = 0; m < T; ++m)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        const double a = static_cast<double>(start + m) * std::pow(theta, -2.0 * i / d);
        const double x0 = x.at({0, m, h, i}), x1 = x.at({0, m, h, i + d / 2});
        EXPECT_NEAR(y.at({0, m, h, i}), x0 * std::cos(a) - x1 * std::sin(a), 1e-14);
        EXPECT_NEAR(y.at({0, m, h, i + d / 2}), x1 * std::cos(a) + x0 * std::sin(a), 1e-14);
      }
  // float32 tables are computed in float32 and agree to its precision
  const std::vector<Tensor> f = rope_tables(start, T, d, theta, Dtype::f32);
  EXPECT_EQ(f[0].dtype(), Dtype::f32);
  EXPECT_LE(max_abs_diff(f[1], t[1]), 1e-5);
  EXPECT_THROW(rope_tables(0, 2, 5, theta, Dtype::f64), ValueError);
}

// <rope(q, m), rope(k, n)> depends on m - n only: the scores see relative positions.
TEST(Llama, RotatedScoresDependOnTheOffsetOnly) {
  const int64_t d = 8;
  Rng rng(5);
  const Tensor q = randn({1, 1, 1, d}, rng, Dtype::f64), k = randn({1, 1, 1, d}, rng, Dtype::f64);
  const auto score = [&](int64_t m, int64_t n) {
    const std::vector<Tensor> tm = rope_tables(m, 1, d, 10000.0, Dtype::f64);
    const std::vector<Tensor> tn = rope_tables(n, 1, d, 10000.0, Dtype::f64);
    return sum(mul(rotary(q, tm[0], tm[1]), rotary(k, tn[0], tn[1]))).item();
  };
  EXPECT_NEAR(score(5, 2), score(9, 6), 1e-12);
  EXPECT_NEAR(score(0, 0), score(7, 7), 1e-12);
  EXPECT_GT(std::abs(score(5, 2) - score(5, 3)), 1e-6);  // another offset, another score
}

// A model with 2 key/value heads equals one with 4 whose k and v weights repeat each head for
// its 2 query heads (kv head j serves query heads 2j and 2j + 1).
TEST(Llama, GroupedQueryAttentionEqualsRepeatedHeads) {
  Rng rng(6);
  Llama grouped(tiny_llama(2), rng);
  grouped.load_state_dict(random_state(grouped, rng));
  Llama full(tiny_llama(4), rng);
  NamedTensors state;
  for (const auto& [name, p] : grouped.state_dict()) {
    if (name.find("k_proj") == std::string::npos && name.find("v_proj") == std::string::npos) {
      state.emplace_back(name, p);
      continue;
    }
    std::vector<Tensor> rows;  // (2 heads x 2 dims, 8) -> (4 heads x 2 dims, 8)
    for (int64_t j = 0; j < 2; ++j) {
      const Tensor head = narrow(p, 0, 2 * j, 2);
      rows.push_back(head);
      rows.push_back(head);
    }
    state.emplace_back(name, cat(rows, 0));
  }
  full.load_state_dict(state);
  const Tensor idx = tokens({0, 6, 2, 3, 1, 5, 4, 4}, 2, 4);
  EXPECT_LE(max_abs_diff(grouped.forward(idx), full.forward(idx)), 1e-12);
  // negative control: the heads in the other order (kv head j serving heads j and j + 2) differ
  NamedTensors swapped = state;
  for (auto& [name, p] : swapped)
    if (name.find("k_proj") != std::string::npos)
      p = cat({narrow(p, 0, 0, 2), narrow(p, 0, 4, 2), narrow(p, 0, 2, 2), narrow(p, 0, 6, 2)}, 0);
  full.load_state_dict(swapped);
  EXPECT_GT(max_abs_diff(grouped.forward(idx), full.forward(idx)), 1e-6);
}

TEST(Llama, GradcheckOfTheLossInEveryParameter) {
  for (bool tie : {false, true}) {
    SCOPED_TRACE(tie ? "tied" : "lm_head");
    LlamaConfig c = tiny_llama(2, tie);
    c.num_hidden_layers = 1;
    c.max_position_embeddings = 4;
    Rng rng(7);
    Llama model(c, rng);
    const NamedTensors state = random_state(model, rng);
    const Tensor idx = tokens({0, 3, 1, 6, 2, 2, 5, 1}, 2, 4);
    const Tensor targets = tokens({3, 1, 6, -1, 2, 0, 1, 3}, 2, 4);
    const GradcheckResult r =
        test::gradcheck_every_parameter(model, state, [&] { return model.loss(idx, targets); });
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_FALSE(r.vacuous);
  }
}

// Chunks of new positions after the cached ones give the rows of one full forward; the cache
// holds the key/value heads only.
TEST(Llama, CachedChunksEqualOneFullForward) {
  for (Dtype dtype : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    LlamaConfig c = tiny_llama();
    c.dtype = dtype;
    Rng rng(8);
    Llama model(c, rng);
    model.load_state_dict(random_state(model, rng));
    const std::vector<int64_t> seq = {1, 4, 3, 0, 2, 2, 6, 1, 0, 3, 1, 1, 2, 4, 0, 5};  // (2, 8)
    const Tensor full = model.forward(tokens(seq, 2, 8));                         // (2, 8, V)
    KVCache cache;
    int64_t start = 0;
    for (int64_t T_new : {3, 2, 1, 2}) {
      std::vector<int64_t> chunk;
      for (int64_t b = 0; b < 2; ++b)
        chunk.insert(chunk.end(), seq.begin() + b * 8 + start, seq.begin() + b * 8 + start + T_new);
      const Tensor step = model.forward_cached(tokens(chunk, 2, T_new), cache);
      EXPECT_FALSE(step.requires_grad());
      EXPECT_LE(max_abs_diff(step, narrow(full, 1, start, T_new)),
                dtype == Dtype::f64 ? 1e-11 : 1e-4)
          << "positions " << start << ".." << start + T_new - 1;
      start += T_new;
      ASSERT_EQ(cache.k.size(), 2u);
      EXPECT_EQ(cache.k[0].shape(), Shape({2, start, 2 * 2}));  // H_kv 2 heads of d 2
    }
    EXPECT_THROW(model.forward_cached(tokens({0, 0}, 2, 1), cache), ValueError);  // past 8
  }
}

TEST(Llama, ConfigJsonHasHuggingFacesKeys) {
  LlamaConfig c = tiny_llama(1, true);
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
  const nlohmann::json j = nlohmann::json::parse(llama_config_to_json(c));
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(j["model_type"], "llama");
  EXPECT_EQ(j["torch_dtype"], "float64");
  EXPECT_EQ(j["hidden_size"], 8);
  EXPECT_EQ(j["num_key_value_heads"], 1);
  EXPECT_EQ(j["rope_theta"], 500000.0);
  EXPECT_EQ(j["tie_word_embeddings"], true);
  const LlamaConfig back = llama_config_from_json(j.dump());
  EXPECT_EQ(llama_config_to_json(back), llama_config_to_json(c));
  // A Hugging Face config.json: torch_dtype instead of dtype, num_key_value_heads absent
  nlohmann::json hf = j;
  hf.erase("dtype");
  hf.erase("num_key_value_heads");
  hf["torch_dtype"] = "float32";
  const LlamaConfig read = llama_config_from_json(hf.dump());
  EXPECT_EQ(read.dtype, Dtype::f32);
  EXPECT_EQ(read.num_key_value_heads, 4);
  hf["torch_dtype"] = "bfloat16";
  EXPECT_THROW(llama_config_from_json(hf.dump()), ValueError);
  nlohmann::json missing = j;
  missing.erase("intermediate_size");
  try {
    llama_config_from_json(missing.dump());
    FAIL() << "a config without intermediate_size loaded";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("intermediate_size"), std::string::npos) << e.what();
  }
}

TEST(Llama, FromPretrainedLoadsWhatSavePretrainedWrote) {
  for (bool tie : {false, true}) {
    const test::TempDir dir;
    Rng rng(9);
    Llama model(tiny_llama(2, tie), rng);
    model.load_state_dict(random_state(model, rng));
    save_pretrained(model, dir.file("ckpt"));
    const SafeTensors file = read_safetensors(dir.file("ckpt/model.safetensors"));
    EXPECT_EQ(file.metadata.at("format"), "pt");
    const auto loaded = from_pretrained(dir.file("ckpt"));
    EXPECT_EQ(llama_config_to_json(loaded->config()), llama_config_to_json(model.config()));
    const Tensor idx = tokens({0, 6, 2, 3, 1, 5}, 2, 3);
    EXPECT_EQ(max_abs_diff(loaded->forward(idx), model.forward(idx)), 0);
  }
  const test::TempDir dir;
  EXPECT_THROW(from_pretrained(dir.file("nothing")), IoError);
  Rng rng(10);
  Llama model(tiny_llama(), rng);
  save_pretrained(model, dir.file("ckpt"));
  test::spit(dir / "ckpt" / "config.json",
             llama_config_to_json(tiny_llama(4)));  // the file's k_proj is (4, 8), not (8, 8)
  try {
    from_pretrained(dir.file("ckpt"));
    FAIL() << "weights of another shape loaded";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("k_proj"), std::string::npos) << e.what();
  }
}

TEST(Llama, BadConfigsAndInputsNameTheProblem) {
  const auto refuses = [](LlamaConfig c, const std::string& words) {
    Rng rng(0);
    try {
      Llama model(c, rng);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  LlamaConfig c = tiny_llama();
  c.num_attention_heads = 3;
  refuses(c, "does not divide hidden_size");
  c = tiny_llama(3);
  refuses(c, "num_key_value_heads = 3 does not divide");
  c = tiny_llama();
  c.hidden_size = 12;  // head_dim 3
  refuses(c, "must be even");
  c = tiny_llama();
  c.intermediate_size = 0;
  refuses(c, ">= 1");
  c = tiny_llama();
  c.rope_theta = 0;
  refuses(c, "rope_theta");
  c = tiny_llama();
  c.dtype = Dtype::i64;
  refuses(c, "dtype");

  const Tensor tab = zeros({3, 2}, Dtype::f64);
  for (const auto& [what, f] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"(3, 4)", [&] { rotary(zeros({3, 4}, Dtype::f64), tab, tab); }},           // rank 2
           {"(3, 1, 5)", [&] { rotary(zeros({3, 1, 5}, Dtype::f64), tab, tab); }},     // odd d
           {"(3, 2) and sin (2, 2)", [&] { rotary(zeros({3, 1, 4}, Dtype::f64), tab, zeros({2, 2}, Dtype::f64)); }}}) {
    try {
      f();
      ADD_FAILURE() << "rotary accepted " << what;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("rotary"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(rotary(zeros({3, 1, 4}, Dtype::f32), tab, tab), ValueError);  // dtypes differ

  Rng rng(11);
  Llama model(tiny_llama(), rng);
  EXPECT_THROW(model.forward(from_indices({0, 1, 2}, {3})), ShapeError);
  EXPECT_THROW(model.forward(tokens(std::vector<int64_t>(9, 0), 1, 9)), ValueError);  // > 8
  EXPECT_THROW(model.forward(tokens({0, 7}, 1, 2)), ValueError);  // token 7 of vocab 7
  EXPECT_THROW(model.loss(tokens({0, 1}, 1, 2), tokens({0, 1, 2}, 1, 3)), ShapeError);
}

}  // namespace
}  // namespace tg::nn
