#include <tapegrad/nn/gpt_config.h>

#include <vector>

#include <tapegrad/nn/config_json.h>

namespace tg::nn {

namespace {

static_assert(static_cast<int>(GeluKind::tanh) == 0 && static_cast<int>(GeluKind::erf) == 1,
              "kGeluNames lists GeluKind's values in order");

// Every field of GPTConfig by its tapegrad.config key.
std::vector<ConfigField> config_fields(GPTConfig& c) {
  return {{"vocab_size", &c.vocab_size},
          {"block_size", &c.block_size},
          {"n_layer", &c.n_layer},
          {"n_head", &c.n_head},
          {"n_embd", &c.n_embd},
          {"bias", &c.bias},
          {"gelu", enum_ref(c.gelu, kGeluNames)},
          {"attention_only", &c.attention_only},
          {"dropout", &c.dropout},
          {"dtype", enum_ref(c.dtype, kDtypeNames)}};
}

}  // namespace

std::string gpt_config_to_json(const GPTConfig& config) {
  GPTConfig c = config;  // the field list refers to members it may write
  return config_to_json(config_fields(c));
}

GPTConfig gpt_config_from_json(const std::string& json) {
  GPTConfig c;
  config_from_json(json, config_fields(c));
  return c;
}

}  // namespace tg::nn
