#pragma once
// `tapegrad train`: main.cpp parses the flags (CLI11) into TrainArgs and calls run_train, which
// the tests and the fuzz target also call in-process.

#include <cstdint>
#include <ostream>
#include <set>
#include <string>

#include <tapegrad/autograd/error.h>

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
  // Data: exactly one of text, task, batches, images.
  std::string text;     // --text FILE
  std::string task;     // --task induction
  std::string batches;  // --batches FILE.npy
  std::string images;   // --images DIR (IDX files: data/idx.h)
  std::string out;      // --out DIR
  // The model (ignored with --resume, which takes the checkpoint's config; a flag given
  // explicitly must then agree with it). Which of these an architecture reads, and the config
  // fields they set, its ModelFlag table says (tools/arch.h).
  std::string arch;  // --arch NAME; empty: the default architecture
  int64_t layers = 4, heads = 4, embd = 128, block = 64;
  int64_t vocab = 0;  // 0: not given
  bool no_bias = false;
  std::string gelu = "tanh";
  bool attention_only = false;
  double dropout = 0.0;
  std::string dtype = "f32";
  int64_t hidden = 256;  // --arch mlp
  // --arch llama; 0 (not given): --heads, and 8/3 of --embd rounded up to a multiple of 8
  int64_t kv_heads = 0, intermediate = 0;
  bool tie = false;  // --arch llama: lm_head shares embed_tokens' weight (tie_word_embeddings)
  std::string init;    // --init FILE.safetensors
  std::string resume;  // --resume DIR
  uint64_t seed = 0;
  // The run.
  int64_t batch = 12, steps = 2000;
  // Image runs count epochs: steps = epochs * ceil(training images / batch); an epoch visits
  // the first train_limit training images (0: all) in a seeded order, or in file order.
  int64_t epochs = 0;
  bool no_shuffle = false;
  int64_t train_limit = 0;
  std::string optimizer = "adamw";
  double lr = 1e-3, lr_min = 1e-4;
  int64_t warmup = 100;
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1, momentum = 0.0;
  double grad_clip = 1.0;
  int64_t eval_every = 100, eval_batches = 20;
  int threads = 0;  // 0: leave tg::num_threads() as it is
  bool checkpoint_blocks = false;  // how the run computes, not what it trains: not recorded
  bool no_replay = false;          // each update recorded anew (no StaticStep): not recorded
  // The flags the user wrote (without dashes: "layers", "batch"), to tell a default from a choice.
  std::set<std::string> given;
  // The command line as typed, for the "resume with" hint after Ctrl-C.
  std::string command_line;
  bool handle_sigint = true;  // the fuzz target and tests running in-process turn it off
};

/// `tapegrad train`: trains a model and writes model.safetensors, train_state.safetensors,
/// metrics.csv and loss.svg to args.out; progress goes to `err`. Returns the exit status: 0, or
/// 130 after Ctrl-C (the state saved for --resume). Throws UsageError (flags that do not fit
/// together), IoError / ValueError / ShapeError (bad files or values); args.out is then as it was.
int run_train(const TrainArgs& args, std::ostream& err);
/// The same on the ranks of `comm` (every rank calls it with the same flags): data-parallel
/// training (gradients averaged over the ranks' slices of each global batch); rank 0 writes the
/// files and prints to `err`. With several ranks an error on any rank is thrown on every rank as
/// one dist::RankError (status 2 for usage, else 1), and a batch that does not split evenly over
/// the ranks is a usage error.
int run_train(const TrainArgs& args, std::ostream& err, dist::Communicator& comm);

}  // namespace tg
