#pragma once
// The architectures that `tapegrad train`, `sample` and `inspect` work with, behind one small
// interface. The program holds a Model and never names an architecture: it finds how to build
// one in the table of Archs (tools/arch.cpp) by the --arch name, or by the one a checkpoint
// records. Adding an architecture is its model in nn/ and an adapter file here (a Model, its
// table of model flags and its Arch; tools/arch_gpt.cpp is the pattern), listed in that table.
//
// A model's config travels as the JSON of its tapegrad.config: the flags become that JSON
// through the architecture's ModelFlag table (flag, TrainArgs member, config key), the model
// reads it with nn/'s field list for its config, and --resume reads a checkpoint's config back
// into the flags through the same ModelFlag table.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <tapegrad/data/batch.h>
#include <tapegrad/nn/module.h>
#include "tools/train_cmd.h"

namespace tg {

struct Arch;

/// Continues a token sequence with a cache of the positions it has seen (GPT: each layer's keys
/// and values), so that a new token costs one position's forward; for `tapegrad sample`.
class Decoder {
 public:
  virtual ~Decoder() = default;
  /// The longest context the model takes (block_size).
  virtual int64_t max_context() const = 0;
  /// The number of positions cached.
  virtual int64_t cached() const = 0;
  /// Logits (1, T_new, V) of `tokens`, the positions after the cached ones, which joins them to
  /// the cache. Throws ValueError when the sequence would pass max_context().
  virtual Tensor forward(const std::vector<int64_t>& tokens) = 0;
  /// Empties the cache.
  virtual void clear() = 0;
};

/// A model of any architecture, as the program trains, saves, evaluates and samples it.
class Model {
 public:
  virtual ~Model() = default;
  virtual const Arch& arch() const = 0;
  /// Its parameters (named_parameters() give the state_dict names) and its mode (train() /
  /// eval()). A Model is a handle: const or not, this is the same module.
  virtual nn::Module& module() const = 0;
  /// The parameters' dtype.
  virtual Dtype dtype() const = 0;
  /// The config as the JSON text of tapegrad.config. Never throws.
  virtual std::string config_json() const = 0;
  /// How loss.svg's title names the model ("2 layers, n_embd 32"). Never throws.
  virtual std::string summary() const = 0;
  /// Logits of a batch's inputs, the classes on the last axis ((B, T) tokens -> (B, T, V)).
  /// Throws as the model's forward (ShapeError, ValueError for inputs it does not take).
  virtual Tensor forward(const Tensor& x) const = 0;
  /// What training minimises: the mean cross-entropy of `logits` (forward's) against the labels
  /// y, over the labels that are not -1. Throws ShapeError when they do not fit.
  virtual Tensor loss(const Tensor& logits, const Tensor& y) const = 0;
  /// The generator the model's dropout draws from (a run saves and restores it).
  virtual Rng& dropout_rng() = 0;
  /// Whether a state_dict entry of this name is one the model derives rather than holds (GPT's
  /// lm_head.weight is transformer.wte.weight): loading a file skips it. Never throws.
  virtual bool tied(const std::string&) const { return false; }
  /// The config.json of a Hugging Face pretrained folder, which a run writes beside
  /// model.safetensors (llama); else nullopt. Never throws.
  virtual std::optional<std::string> pretrained_config() const { return std::nullopt; }
  /// A decoder over this model, for models that continue token sequences; else null.
  virtual std::unique_ptr<Decoder> decoder() const { return nullptr; }
  /// --dropout for an architecture whose flag table has no "dropout" (one flag setting several
  /// dropouts, the model's own defaults kept when it is not given): sets every dropout to p.
  /// The others take --dropout through their config; for them this is never called. Throws
  /// ValueError for p outside [0, 1).
  virtual void set_dropout(double) {}
  /// --checkpoint-blocks: each block of the model under tg::checkpoint. Throws UsageError for an
  /// architecture without blocks.
  virtual void set_checkpoint_blocks();

  /// loss(forward(batch.x), batch.y).
  Tensor batch_loss(const data::Batch& batch) const { return loss(forward(batch.x), batch.y); }
};

/// A model flag of an architecture and the config key it sets (--layers sets n_layer). A flag
/// spells its values as the config does ("tanh", "f32"); a bool flag may set the negation of
/// its key (--no-bias: bias false).
struct ModelFlag {
  using Member = std::variant<int64_t TrainArgs::*, bool TrainArgs::*, double TrainArgs::*,
                              std::string TrainArgs::*>;
  const char* flag;  // without dashes, as TrainArgs::given holds it
  const char* key;   // in tapegrad.config
  Member member;
  bool negated = false;
};

/// An architecture: its name, its model flags and how a model is built from its config.
struct Arch {
  const char* name;                  // --arch NAME; a checkpoint's tapegrad.arch
  std::span<const ModelFlag> flags;  // the model flags it reads, in the order --resume checks them
  /// A model from the JSON text of tapegrad.config, its weights drawn from init_rng. Throws
  /// ValueError (a missing or mistyped field, a config the model refuses).
  std::unique_ptr<Model> (*build)(const std::string& config_json, Rng& init_rng);
  bool images = false;  // trains on --images (by epochs), not on token sequences
};

/// The architecture named `name`, or null. Never throws.
const Arch* find_arch(const std::string& name);
/// The architecture of an empty --arch and of a checkpoint that records none (every one
/// written before --arch had other values): the table's first. Never throws.
const Arch& default_arch();
/// The architecture of an empty --arch with --images: the table's first that takes images.
/// Never throws.
const Arch& default_image_arch();
/// Whether `flag` (without dashes) is a model flag of some architecture of the table. Never
/// throws.
bool is_model_flag(const std::string& flag);
/// The names of the table, for messages: "gpt", "gpt or llama". Never throws.
std::string arch_names();
/// The architecture args.arch names (the default when empty). Throws UsageError for a name
/// not in the table, listing the known ones.
const Arch& arch_of(const TrainArgs& args);

/// The config JSON of args' model flags (checked by check_train_flags) for `arch`. Never throws.
std::string config_json_of(const Arch& arch, const TrainArgs& args);
/// Sets args' model flags, and args.arch, to the ones that build `model`. Throws ValueError
/// when its config lacks a key of the flag table or holds another type there.
void set_model_flags(const Model& model, TrainArgs& args);
/// The value of `flag` in args as messages show it: "4", "on", "tanh", "0.10000000000000001".
/// Never throws.
std::string flag_text(const TrainArgs& args, const ModelFlag& flag);

}  // namespace tg
