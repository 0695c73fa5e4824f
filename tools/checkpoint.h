#pragma once
// What `tapegrad train` writes and `train --resume`, `train --init`, `sample` and `inspect` read
// (safetensors files, io/safetensors.h):
//   train_state.safetensors  the checkpoint, one file that holds everything --resume needs: the
//                            weights as model.NAME with the model's metadata (tapegrad.config,
//                            tapegrad.vocab, tapegrad.arch, tapegrad.step, as below), the
//                            optimizer's state_dict (optim.step, optim.m.NAME, ...), step,
//                            data.position, rng.data and rng.dropout (the generators' states),
//                            and metrics (the rows of metrics.csv so far, tools/metrics.h)
//   model.safetensors        the parameters by the model's state_dict names (nanoGPT's for gpt);
//                            metadata tapegrad.config (the model's config as JSON, tools/arch.h),
//                            tapegrad.vocab (text models), tapegrad.step, and tapegrad.arch for
//                            an architecture other than the default (absent: gpt, as every
//                            checkpoint written before there were others)
// A save writes train_state.safetensors first (a temporary file, fsync'd, renamed), then the
// files for users (model.safetensors, metrics.csv, loss.svg) from the same state. A kill at any
// moment leaves the previous checkpoint or the new one, whole; --resume reads that file alone
// and the next save rewrites the others. A train state written before it held the weights (no
// tapegrad.config) is resumed with the model.safetensors and metrics.csv beside it, which must
// then be from the same update.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tools/arch.h"

namespace tg::ckpt {

struct ModelFile {
  std::unique_ptr<Model> model;      // built from tapegrad.config, with initial weights of its own
  std::optional<std::string> vocab;  // tapegrad.vocab
  int64_t step = -1;                 // tapegrad.step, -1 when absent
  NamedTensors tensors;              // the file's weights: load_weights puts them in the model
};

/// Reads a model.safetensors that tapegrad wrote and builds the model its metadata describes.
/// Throws IoError (unreadable, malformed, no tapegrad.config, an unknown tapegrad.arch, a config
/// the architecture refuses or with a size outside [1, 2^24], a vocabulary that does not fit).
ModelFile read_model(const std::string& path);
/// The same from the file's bytes (read by one rank, broadcast to the others); `path` names
/// the file in errors. Throws IoError as read_model, but for the reading.
ModelFile parse_model(std::string_view bytes, const std::string& path);
/// The same from a file's metadata and the model's tensors in it (train_state.safetensors':
/// model_tensors()). Throws IoError as read_model.
ModelFile model_from(const std::map<std::string, std::string>& metadata, NamedTensors tensors,
                     const std::string& path);

/// The prefix of the weights' names in train_state.safetensors.
inline constexpr std::string_view kWeightsPrefix = "model.";
/// Adds the model to a file's contents: its weights (state_dict names, after `prefix`) to
/// `tensors`, tapegrad.config, tapegrad.step, tapegrad.arch and tapegrad.vocab to `metadata`.
/// Never throws but for memory.
void add_model(NamedTensors& tensors, std::map<std::string, std::string>& metadata,
               const Model& model, const std::optional<std::string>& vocab, int64_t step,
               std::string_view prefix = "");
/// The tensors of `tensors` whose names start with `prefix`, the prefix removed.
NamedTensors model_tensors(const NamedTensors& tensors, std::string_view prefix = kWeightsPrefix);
/// Whether a file's metadata describes a model (holds tapegrad.config).
bool holds_model(const std::map<std::string, std::string>& metadata);

/// Copies `tensors` into the model's parameters: floating tensors converted to the model's dtype,
/// the ones the model ties to another (GPT: lm_head.weight, which nanoGPT's state_dict has)
/// skipped. Throws ValueError naming `file` and the tensor (missing, unexpected, int64, another
/// shape, a non-finite value).
void load_weights(Model& model, NamedTensors tensors, const std::string& file);

/// Writes model.safetensors (via a temporary file); throws IoError / ValueError.
void write_model(const std::string& path, const Model& model,
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
