// The table of architectures (tools/arch.h) and the mappings it is made of, in-process:
//   the table:       the one place an architecture is named: --arch and a checkpoint's
//                    tapegrad.arch are looked up in it, an unknown name lists the known ones
//   config <-> JSON: GPTConfig's tapegrad.config text is the one earlier checkpoints have (a
//                    frozen string), reads back to the same config, and a bad field is named
//   flags <-> JSON:  the model flags (ModelFlag rows) build the config they name, and a model's
//                    config reads back into the same flags (--resume's direction)

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <tapegrad/nn/config_json.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/gpt_config.h>
#include <tapegrad/nn/llama.h>
#include "data_util.h"
#include "test_util.h"
#include "tools/arch.h"

namespace tg {
namespace {

using test::expect_rows;
using test::throws;

TEST(ArchTable, GptIsTheDefaultAndUnknownNamesListTheKnownOnes) {
  ASSERT_NE(find_arch("gpt"), nullptr);
  EXPECT_EQ(&default_arch(), find_arch("gpt"));
  ASSERT_NE(find_arch("llama"), nullptr);
  EXPECT_EQ(find_arch("mamba"), nullptr);
  EXPECT_EQ(arch_names(), "gpt, llama, cnn or mlp");
  EXPECT_EQ(&default_image_arch(), find_arch("cnn"));
  TrainArgs args;
  EXPECT_EQ(&arch_of(args), &default_arch());  // an empty --arch
  args.arch = "gpt";
  EXPECT_EQ(&arch_of(args), find_arch("gpt"));
  args.arch = "mamba";
  try {
    arch_of(args);
    ADD_FAILURE() << "an unknown --arch was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--arch must be gpt, llama, cnn or mlp, got 'mamba'");
  }
}

// A model's config read into the flags (--resume's direction) gives the flags that build the
// same config again (a fresh run's direction), every field through the one ModelFlag table.
TEST(ArchTable, FlagsAndConfigMapBothWays) {
  const nn::GPTConfig c{.vocab_size = 5, .block_size = 6, .n_layer = 3, .n_head = 2, .n_embd = 8,
                        .bias = false, .gelu = nn::GeluKind::erf, .attention_only = true,
                        .dropout = 0.25, .dtype = Dtype::f64};
  const Arch& arch = *find_arch("gpt");
  Rng rng(0);
  const std::unique_ptr<Model> model = arch.build(nn::gpt_config_to_json(c), rng);
  EXPECT_EQ(model->dtype(), Dtype::f64);
  TrainArgs flags;  // the defaults, then the model's
  set_model_flags(*model, flags);
  EXPECT_EQ(flags.arch, "gpt");
  std::string texts;
  for (const ModelFlag& f : arch.flags)
    texts += std::string(f.flag) + "=" + flag_text(flags, f) + " ";
  EXPECT_EQ(texts, "layers=3 heads=2 embd=8 block=6 vocab=5 no-bias=on gelu=erf "
                   "attention-only=on dropout=0.25 dtype=f64 ");
  EXPECT_EQ(config_json_of(arch, flags), model->config_json());
  Rng again(0);
  const std::unique_ptr<Model> rebuilt = arch.build(config_json_of(arch, flags), again);
  EXPECT_EQ(rebuilt->config_json(), nn::gpt_config_to_json(c));
}

// The same both ways for the Llama, whose flags set Hugging Face's config keys; a --kv-heads and
// --intermediate left at 0 (not given) build --heads key/value heads and 8/3 of --embd.
TEST(ArchTable, LlamaFlagsAndConfigMapBothWays) {
  const Arch& arch = *find_arch("llama");
  TrainArgs flags;
  flags.arch = "llama";
  flags.vocab = 9;
  flags.embd = 24;
  flags.heads = 4;
  flags.block = 10;
  flags.layers = 2;
  Rng rng(0);
  const std::unique_ptr<Model> defaults = arch.build(config_json_of(arch, flags), rng);
  const auto& llama = dynamic_cast<const nn::Llama&>(defaults->module());
  EXPECT_EQ(llama.config().num_key_value_heads, 4);
  EXPECT_EQ(llama.config().intermediate_size, 64);  // 8/3 of 24
  EXPECT_EQ(llama.config().max_position_embeddings, 10);
  EXPECT_EQ(defaults->pretrained_config(), defaults->config_json());
  flags.kv_heads = 2;
  flags.intermediate = 40;
  flags.dtype = "f64";
  flags.tie = true;
  const std::unique_ptr<Model> model = arch.build(config_json_of(arch, flags), rng);
  EXPECT_TRUE(dynamic_cast<const nn::Llama&>(model->module()).config().tie_word_embeddings);
  TrainArgs back;
  set_model_flags(*model, back);
  std::string texts;
  for (const ModelFlag& f : arch.flags) texts += std::string(f.flag) + "=" + flag_text(back, f) + " ";
  EXPECT_EQ(texts, "layers=2 heads=4 kv-heads=2 embd=24 intermediate=40 block=10 vocab=9 tie=on "
                   "dtype=f64 ");
  EXPECT_EQ(back.arch, "llama");
  TrainArgs gpt;  // a GPT's folder has no config.json
  gpt.vocab = 5;
  const Arch& gpt_arch = *find_arch("gpt");
  EXPECT_FALSE(gpt_arch.build(config_json_of(gpt_arch, gpt), rng)->pretrained_config().has_value());
}

// The text every GPT checkpoint so far has: changing it would change model.safetensors.
TEST(GptConfigJson, IsTheCheckpointsTextAndReadsBack) {
  const test::DefaultDtypeScope library_default(Dtype::f32);  // GPTConfig{} takes the default
  EXPECT_EQ(nn::gpt_config_to_json(nn::GPTConfig{}),
            R"({"attention_only":false,"bias":true,"block_size":64,"dropout":0.0,"dtype":"f32",)"
            R"("gelu":"tanh","n_embd":128,"n_head":4,"n_layer":4,"vocab_size":65})");
  const nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                        .bias = false, .gelu = nn::GeluKind::erf, .attention_only = true,
                        .dropout = 0.1, .dtype = Dtype::f64};
  const nn::GPTConfig r = nn::gpt_config_from_json(nn::gpt_config_to_json(c));
  EXPECT_EQ(nn::gpt_config_to_json(r), nn::gpt_config_to_json(c));
  EXPECT_EQ(r.gelu, nn::GeluKind::erf);
  EXPECT_EQ(r.dtype, Dtype::f64);
  EXPECT_EQ(r.dropout, 0.1);
}

TEST(GptConfigJson, NamesTheBadField) {
  const test::DefaultDtypeScope library_default(Dtype::f32);  // the text with "dtype":"f32"
  const std::string good = nn::gpt_config_to_json(nn::GPTConfig{});
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const auto read = [](const std::string& json) {
    return throws<ValueError>([json] { nn::gpt_config_from_json(json); });
  };
  expect_rows({
      {"not an object", read("[1, 2]"), "is not a JSON object"},
      {"not JSON", read("{\"n_layer\": "), "is not a JSON object"},
      {"missing", read(with("\"n_layer\":4,", "")), "has no integer field 'n_layer'"},
      {"a float size", read(with("\"n_layer\":4", "\"n_layer\":4.5")), "has no integer field 'n_layer'"},
      {"a string bias", read(with("\"bias\":true", "\"bias\":\"yes\"")), "has no boolean field 'bias'"},
      {"a number gelu", read(with("\"gelu\":\"tanh\"", "\"gelu\":1")), "has no string field 'gelu'"},
      {"gelu none", read(with("\"tanh\"", "\"none\"")), "has gelu 'none' (tanh or erf)"},
      {"dtype i64", read(with("\"f32\"", "\"i64\"")), "has dtype 'i64' (f32 or f64)"},
  });
  // An integer dropout is a number all the same.
  EXPECT_EQ(nn::gpt_config_from_json(with("\"dropout\":0.0", "\"dropout\":0")).dropout, 0.0);
}

TEST(ConfigNames, ListAndFind) {
  EXPECT_EQ(nn::one_of(nn::kGeluNames), "tanh or erf");
  const char* const three[] = {"a", "b", "c"};
  EXPECT_EQ(nn::one_of(three), "a, b or c");
  EXPECT_EQ(nn::find_name(nn::kDtypeNames, "f64"), 1u);
  EXPECT_FALSE(nn::find_name(nn::kDtypeNames, "f16").has_value());
}

}  // namespace
}  // namespace tg
