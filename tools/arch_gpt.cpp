// --arch gpt: nn::GPT (nanoGPT's architecture) as the program's Model. Its model flags and the
// tapegrad.config keys they set (nanoGPT's model_args names) are the table below; the config's
// JSON is nn/gpt_config.h's, and generation goes through GPT::forward_cached's KV cache.

#include <memory>
#include <string>
#include <vector>

#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/gpt_config.h>
#include <tapegrad/ops/cross_entropy.h>
#include <tapegrad/ops/reshape.h>
#include "tools/arch.h"

namespace tg {

extern const Arch kGptArch;

namespace {

constexpr ModelFlag kFlags[] = {
    {"layers", "n_layer", &TrainArgs::layers},
    {"heads", "n_head", &TrainArgs::heads},
    {"embd", "n_embd", &TrainArgs::embd},
    {"block", "block_size", &TrainArgs::block},
    {"vocab", "vocab_size", &TrainArgs::vocab},
    {"no-bias", "bias", &TrainArgs::no_bias, /*negated=*/true},
    {"gelu", "gelu", &TrainArgs::gelu},
    {"attention-only", "attention_only", &TrainArgs::attention_only},
    {"dropout", "dropout", &TrainArgs::dropout},
    {"dtype", "dtype", &TrainArgs::dtype},
};

// The model's keys and values of the positions generated so far.
class GptDecoder : public Decoder {
 public:
  explicit GptDecoder(const nn::GPT& gpt) : gpt_(gpt) {}
  int64_t max_context() const override { return gpt_.config().block_size; }
  int64_t cached() const override { return cache_.length(); }
  Tensor forward(const std::vector<int64_t>& tokens) override {
    const auto T = static_cast<int64_t>(tokens.size());
    return gpt_.forward_cached(from_indices(tokens, {1, T}), cache_);  // (1, T, V)
  }
  void clear() override { cache_.clear(); }

 private:
  const nn::GPT& gpt_;
  nn::KVCache cache_;
};

class GptModel : public Model {
 public:
  GptModel(const nn::GPTConfig& config, Rng& init_rng)
      : gpt_(std::make_unique<nn::GPT>(config, init_rng)) {}

  const Arch& arch() const override { return kGptArch; }
  nn::Module& module() const override { return *gpt_; }
  Dtype dtype() const override { return config().dtype; }
  std::string config_json() const override { return nn::gpt_config_to_json(config()); }
  std::string summary() const override {
    return std::to_string(config().n_layer) + " layers, n_embd " + std::to_string(config().n_embd);
  }
  Tensor forward(const Tensor& idx) const override { return gpt_->forward(idx); }
  Tensor loss(const Tensor& logits, const Tensor& targets) const override {
    return cross_entropy(reshape(logits, {-1, config().vocab_size}), reshape(targets, {-1}), -1);
  }
  Rng& dropout_rng() override { return gpt_->dropout_rng(); }
  void set_checkpoint_blocks() override { gpt_->set_checkpoint_blocks(true); }
  bool tied(const std::string& name) const override { return name == "lm_head.weight"; }
  std::unique_ptr<Decoder> decoder() const override { return std::make_unique<GptDecoder>(*gpt_); }

 private:
  const nn::GPTConfig& config() const { return gpt_->config(); }

  std::unique_ptr<nn::GPT> gpt_;
};

std::unique_ptr<Model> build(const std::string& json, Rng& init_rng) {
  const nn::GPTConfig config = nn::gpt_config_from_json(json);  // ValueError naming the field
  try {
    return std::make_unique<GptModel>(config, init_rng);
  } catch (const ValueError&) {  // GPT's own checks: n_head not dividing n_embd, dropout, ...
    throw ValueError(json + " is not a valid GPT config");
  }
}

}  // namespace

const Arch kGptArch{"gpt", kFlags, &build};  // external: declared extern above

}  // namespace tg
