#pragma once
// LlamaConfig as JSON with Hugging Face's LlamaConfig keys (vocab_size, hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// max_position_embeddings, rms_norm_eps, rope_theta, tie_word_embeddings), plus
// "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype" and tapegrad's
// "dtype" ("f32" or "f64"): both a checkpoint's tapegrad.config and a Hugging Face config.json.
// The fields are listed once (llama_config.cpp), for both directions.
//
// A pretrained folder, as Hugging Face's save_pretrained writes one: config.json and
// model.safetensors holding the state_dict under Hugging Face's names.

#include <memory>
#include <string>

#include <tapegrad/nn/llama.h>

namespace tg::nn {

/// The config as JSON text. Throws ValueError for an int64 dtype.
std::string llama_config_to_json(const LlamaConfig& config);
/// Parses a config.json: every key above, where Hugging Face's defaults fill the ones it may
/// leave out (a missing or null num_key_value_heads is num_attention_heads; rms_norm_eps 1e-6,
/// rope_theta 10000, tie_word_embeddings false) and a missing "dtype" is read from
/// "torch_dtype" ("float32" or "float64"). Throws ValueError naming the field.
LlamaConfig llama_config_from_json(const std::string& json);

/// Writes DIR/config.json and DIR/model.safetensors (each atomically; DIR is created). Throws
/// IoError naming the file.
void save_pretrained(const Llama& model, const std::string& dir);
/// The model of a folder save_pretrained wrote (or Hugging Face's, in float32 or float64 with a
/// model.safetensors). Throws IoError (a missing or malformed file), ValueError (a config the
/// model refuses, a tensor missing or of another shape, naming it).
std::unique_ptr<Llama> from_pretrained(const std::string& dir);

}  // namespace tg::nn
