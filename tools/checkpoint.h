#pragma once
// What `tapegrad train` writes and `train --resume`, `train --init` and `sample` read
// (DESIGN.md "Checkpoints"):
//   model.safetensors        the parameters by nanoGPT's names; metadata tapegrad.config (the
//                            GPTConfig as JSON), tapegrad.vocab (text models), tapegrad.step
//   train_state.safetensors  the optimizer's state_dict (optim.step, optim.m.NAME, ...), step,
//                            data.position, rng.data and rng.dropout (the generators' states)
// Both carry the number of updates done, so a folder whose two files come from different
// moments (a crash between the two renames) is refused instead of resumed wrongly.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "nn/gpt.h"

namespace tg::ckpt {

/// The config as the JSON text of tapegrad.config (nanoGPT's model_args names, plus gelu,
/// attention_only and dtype). Never throws.
std::string config_json(const nn::GPTConfig& config);

/// Parses tapegrad.config; throws IoError naming `file` for malformed JSON, a missing or
/// mistyped field, or a value GPT would refuse.
nn::GPTConfig parse_config(const std::string& json, const std::string& file);

struct ModelFile {
  nn::GPTConfig config;
  std::optional<std::string> vocab;  // tapegrad.vocab
  int64_t step = -1;                 // tapegrad.step, -1 when absent
  NamedTensors tensors;
};

/// Reads a model.safetensors that tapegrad wrote; throws IoError (unreadable, malformed, no
/// tapegrad.config).
ModelFile read_model(const std::string& path);
/// The same from the file's bytes (read by one rank, broadcast to the others); `path` names
/// the file in errors. Throws IoError (malformed, no tapegrad.config).
ModelFile parse_model(std::string_view bytes, const std::string& path);

/// Copies `tensors` into the model's parameters: floating tensors converted to the model's dtype,
/// a tied lm_head.weight (nanoGPT's state_dict has one) skipped. Throws ValueError naming `file`
/// and the tensor (missing, unexpected, int64, another shape, a non-finite value).
void load_weights(nn::GPT& model, NamedTensors tensors, const std::string& file);

/// Writes model.safetensors (via a temporary file); throws IoError / ValueError.
void write_model(const std::string& path, const nn::GPT& model,
                 const std::optional<std::string>& vocab, int64_t step);

/// The engine state of `rng` as a 1-D int64 tensor (the words of std::mt19937_64's text form).
Tensor rng_state(Rng& rng);
/// Restores rng_state(); throws IoError naming `what` when the tensor is not such a state.
void set_rng_state(Rng& rng, const Tensor& state, const std::string& what);

/// The int64 scalar `name` of a loaded file; throws IoError naming `file` when it is missing or
/// not a rank-0 int64.
int64_t get_count(const NamedTensors& tensors, const std::string& name, const std::string& file);
/// The tensor `name`; throws IoError naming `file` when it is missing.
const Tensor& get_tensor(const NamedTensors& tensors, const std::string& name,
                         const std::string& file);

}  // namespace tg::ckpt
