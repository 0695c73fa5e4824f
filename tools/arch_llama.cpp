// --arch llama: nn::Llama (Hugging Face's LlamaForCausalLM) as the program's Model, trained on
// the token sequences gpt trains on. Its model flags and the config keys they set (Hugging
// Face's LlamaConfig names) are the table below; the config's JSON is nn/llama_config.h's, also
// written as the run's config.json, so that the --out folder is a pretrained folder
// (nn::from_pretrained, transformers' LlamaForCausalLM.from_pretrained). A --kv-heads or
// --intermediate of 0 (not given) is --heads, and 8/3 of --embd rounded up to a multiple of 8
// (the width that gives the SwiGLU MLP the parameters of a 4x GELU one).

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <tapegrad/nn/llama.h>
#include <tapegrad/nn/llama_config.h>
#include <tapegrad/ops/cross_entropy.h>
#include <tapegrad/ops/reshape.h>
#include "tools/arch.h"

namespace tg {

extern const Arch kLlamaArch;

namespace {

constexpr ModelFlag kFlags[] = {
    {"layers", "num_hidden_layers", &TrainArgs::layers},
    {"heads", "num_attention_heads", &TrainArgs::heads},
    {"kv-heads", "num_key_value_heads", &TrainArgs::kv_heads},
    {"embd", "hidden_size", &TrainArgs::embd},
    {"intermediate", "intermediate_size", &TrainArgs::intermediate},
    {"block", "max_position_embeddings", &TrainArgs::block},
    {"vocab", "vocab_size", &TrainArgs::vocab},
    {"tie", "tie_word_embeddings", &TrainArgs::tie},
    {"dtype", "dtype", &TrainArgs::dtype},
};

// The model's rotated keys and the values of its key/value heads, per layer.
class LlamaDecoder : public Decoder {
 public:
  explicit LlamaDecoder(const nn::Llama& llama) : llama_(llama) {}
  int64_t max_context() const override { return llama_.config().max_position_embeddings; }
  int64_t cached() const override { return cache_.length(); }
  Tensor forward(const std::vector<int64_t>& tokens) override {
    const auto T = static_cast<int64_t>(tokens.size());
    return llama_.forward_cached(from_indices(tokens, {1, T}), cache_);  // (1, T, V)
  }
  void clear() override { cache_.clear(); }

 private:
  const nn::Llama& llama_;
  nn::KVCache cache_;
};

class LlamaModel : public Model {
 public:
  LlamaModel(const nn::LlamaConfig& config, Rng& init_rng)
      : llama_(std::make_unique<nn::Llama>(config, init_rng)) {}

  const Arch& arch() const override { return kLlamaArch; }
  nn::Module& module() const override { return *llama_; }
  Dtype dtype() const override { return config().dtype; }
  std::string config_json() const override { return nn::llama_config_to_json(config()); }
  std::optional<std::string> pretrained_config() const override { return config_json(); }
  std::string summary() const override {
    const nn::LlamaConfig& c = config();
    return "Llama, " + std::to_string(c.num_hidden_layers) + " layers, hidden " +
           std::to_string(c.hidden_size) + ", " + std::to_string(c.num_attention_heads) +
           " heads (" + std::to_string(c.num_key_value_heads) + " kv)";
  }
  Tensor forward(const Tensor& idx) const override { return llama_->forward(idx); }
  Tensor loss(const Tensor& logits, const Tensor& targets) const override {
    return cross_entropy(reshape(logits, {-1, config().vocab_size}), reshape(targets, {-1}), -1);
  }
  Rng& dropout_rng() override { return no_dropout_; }  // saved and restored, drawn from by nothing
  bool tied(const std::string& name) const override {
    return config().tie_word_embeddings && name == "lm_head.weight";
  }
  std::unique_ptr<Decoder> decoder() const override {
    return std::make_unique<LlamaDecoder>(*llama_);
  }
  void set_checkpoint_blocks() override { llama_->set_checkpoint_blocks(true); }
  void set_dropout(double p) override {
    if (p != 0)
      throw UsageError("--arch llama has no dropout (Hugging Face's Llama trains without); "
                       "--dropout must be 0");
  }

 private:
  const nn::LlamaConfig& config() const { return llama_->config(); }

  std::unique_ptr<nn::Llama> llama_;
  Rng no_dropout_{0};
};

// 8/3 of the width, rounded up to a multiple of 8: 344 for 128.
int64_t default_intermediate(int64_t hidden) { return (8 * hidden / 3 + 7) / 8 * 8; }

std::unique_ptr<Model> build(const std::string& json, Rng& init_rng) {
  nn::LlamaConfig config = nn::llama_config_from_json(json);  // ValueError naming the field
  if (config.num_key_value_heads == 0) config.num_key_value_heads = config.num_attention_heads;
  if (config.intermediate_size == 0) config.intermediate_size = default_intermediate(config.hidden_size);
  try {
    return std::make_unique<LlamaModel>(config, init_rng);
  } catch (const ValueError& e) {  // Llama's own checks: heads not dividing, ...
    throw ValueError(json + " is not a valid Llama config: " + e.what());
  }
}

}  // namespace

const Arch kLlamaArch{"llama", kFlags, &build};  // external: declared extern above

}  // namespace tg
