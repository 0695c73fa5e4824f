#pragma once
// `tapegrad train` and `tapegrad sample`: main.cpp parses the flags (CLI11) into these structs and
// calls run_train / run_sample, which the tests and the fuzz target also call in-process.

#include <cstdint>
#include <optional>
#include <ostream>
#include <set>
#include <string>

#include "nn/gpt.h"

namespace tg {

namespace dist {
class Communicator;
}

/// A usage error found after parsing (flags that do not go together): exit status 2.
class UsageError : public ValueError {
 public:
  explicit UsageError(const std::string& m) : ValueError(m) {}
};

struct TrainArgs {
  // Data: exactly one of text, task, batches.
  std::string text;     // --text FILE
  std::string task;     // --task induction
  std::string batches;  // --batches FILE.npy
  std::string out;      // --out DIR
  // The model (ignored with --resume, which takes the checkpoint's config; a flag given
  // explicitly must then agree with it).
  int64_t layers = 4, heads = 4, embd = 128, block = 64;
  int64_t vocab = 0;  // 0: not given
  bool no_bias = false;
  std::string gelu = "tanh";
  bool attention_only = false;
  double dropout = 0.0;
  std::string dtype = "f32";
  std::string init;    // --init FILE.safetensors
  std::string resume;  // --resume DIR
  uint64_t seed = 0;
  // The run.
  int64_t batch = 12, steps = 2000;
  std::string optimizer = "adamw";
  double lr = 1e-3, lr_min = 1e-4;
  int64_t warmup = 100;
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1, momentum = 0.0;
  double grad_clip = 1.0;
  int64_t eval_every = 100, eval_batches = 20;
  int threads = 0;  // 0: leave tg::num_threads() as it is
  // The flags the user wrote (without dashes: "layers", "batch"), to tell a default from a choice.
  std::set<std::string> given;
  // The command line as typed, for the "resume with" hint after Ctrl-C.
  std::string command_line;
  bool handle_sigint = true;  // the fuzz target and tests running in-process turn it off
};

/// `tapegrad train`: trains a GPT and writes model.safetensors, train_state.safetensors,
/// metrics.csv and loss.svg to args.out; progress goes to `err`. Returns the exit status: 0, or
/// 130 after Ctrl-C (the state saved for --resume). Throws UsageError (flags that do not fit
/// together), IoError / ValueError / ShapeError (bad files or values); args.out is then as it was.
int run_train(const TrainArgs& args, std::ostream& err);
/// The same on the ranks of `comm` (every rank calls it with the same flags): data-parallel
/// training as DESIGN.md "Data-parallel training" says; rank 0 writes the files and prints to
/// `err`. With several ranks an error on any rank is thrown on every rank as one
/// dist::RankError (status 2 for usage, else 1), and a batch that does not split evenly over
/// the ranks is a usage error.
int run_train(const TrainArgs& args, std::ostream& err, dist::Communicator& comm);

struct SampleArgs {
  std::string ckpt;  // folder with model.safetensors
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: all tokens
  uint64_t seed = 0;
};

/// `tapegrad sample`: prints the prompt, then args.tokens generated characters, to `out`.
/// Throws IoError (a missing or malformed checkpoint), ValueError (a prompt character outside
/// the vocabulary, a model without one, bad values).
void run_sample(const SampleArgs& args, std::ostream& out);

/// The next token after the sequence `cache` holds, from the last row of logits (V): greedy
/// (argmax, first maximum) when temperature is 0, else a draw from softmax(logits / temperature)
/// restricted to the top_k largest (0: all). Throws ValueError for non-finite logits.
int64_t sample_token(const Tensor& logits_row, double temperature, int64_t top_k, Rng& rng);

/// Generates `n` tokens after `context` (ids, at least one) with the model's KV cache; when the
/// sequence passes block_size the context is cropped to its last block_size tokens and the cache
/// recomputed for that window, as nanoGPT's generate. Throws as GPT::forward_cached.
std::vector<int64_t> generate(const nn::GPT& model, std::vector<int64_t> context, int64_t n,
                              double temperature, int64_t top_k, Rng& rng);

}  // namespace tg
