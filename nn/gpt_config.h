#pragma once
// GPTConfig as JSON, the tapegrad.config of a GPT checkpoint: nanoGPT's model_args names
// (vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout) plus gelu, attention_only
// and dtype, e.g.
//   {"attention_only":false,"bias":true,"block_size":64,"dropout":0.0,"dtype":"f32",
//    "gelu":"tanh","n_embd":128,"n_head":4,"n_layer":4,"vocab_size":65}
// The fields are listed once (gpt_config.cpp), for both directions.

#include <string>

#include <tapegrad/nn/gpt.h>

namespace tg::nn {

/// GeluKind as tapegrad.config and the --gelu flag spell it (GeluKind::tanh, GeluKind::erf).
inline constexpr const char* kGeluNames[] = {"tanh", "erf"};

/// The config as JSON text. Throws ValueError for an int64 dtype (a config GPT refuses).
std::string gpt_config_to_json(const GPTConfig& config);
/// Parses gpt_config_to_json's text. Throws ValueError naming the field: not a JSON object, a
/// missing or mistyped field, a gelu or dtype name outside kGeluNames or kDtypeNames. The values
/// are not checked further: GPT's constructor refuses the ones it cannot build.
GPTConfig gpt_config_from_json(const std::string& json);

}  // namespace tg::nn
