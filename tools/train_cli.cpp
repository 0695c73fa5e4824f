#include "tools/train_cli.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/nn/config_json.h>
#include <tapegrad/nn/gpt_config.h>
#include "tools/arch.h"
#include "tools/cli_checks.h"

namespace tg {

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+@%") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, TrainArgs& a) {
  auto* t = app.add_subcommand("train", "Train a model (nanoGPT's recipe) on text, the induction "
                                        "task or fixed batches");
  // A flag given twice takes the last value, as Python's argparse (and nanoGPT's configurator).
  t->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  t->add_option("--text", a.text, "Char-level text file (its characters are the vocabulary)");
  t->add_option("--task", a.task, "A built-in task: induction")->check(CLI::IsMember({"induction"}));
  t->add_option("--batches", a.batches, "Fixed batches: int64/int32 .npy of shape (N, B, T + 1)");
  t->add_option("--images", a.images, "Folder of IDX image files (MNIST's format: "
                                      "train-images-idx3-ubyte[.gz], ...); --arch cnn or mlp");
  t->add_option("--out", a.out, "Folder for model.safetensors, train_state.safetensors, "
                                "metrics.csv and loss.svg")->required();
  t->add_option("--arch", a.arch, "Architecture: " + arch_names() + " (default " +
                                      default_arch().name + ")");
  t->add_option("--layers", a.layers, "Transformer blocks")->check(int_at_least(1))->capture_default_str();
  t->add_option("--heads", a.heads, "Attention heads (divides --embd)")->check(int_at_least(1))->capture_default_str();
  t->add_option("--embd", a.embd, "Embedding width")->check(int_at_least(1))->capture_default_str();
  t->add_option("--block", a.block, "Context length T")->check(int_at_least(1))->capture_default_str();
  t->add_option("--vocab", a.vocab, "Vocabulary size (required with --task and --batches)")
      ->check(int_at_least(1));
  t->add_flag("--no-bias", a.no_bias, "No biases in Linear and LayerNorm");
  t->add_option("--gelu", a.gelu, "How gelu computes Phi: " + nn::one_of(nn::kGeluNames))
      ->check(member_of(nn::kGeluNames))->capture_default_str();
  t->add_flag("--attention-only", a.attention_only, "Blocks without the MLP");
  t->add_option("--dropout", a.dropout, "Dropout probability")->check(real_in(0, 1))->capture_default_str();
  t->add_option("--dtype", a.dtype, nn::one_of(nn::kDtypeNames))
      ->check(member_of(nn::kDtypeNames))->capture_default_str();
  t->add_option("--kv-heads", a.kv_heads, "Key/value heads of --arch llama (divides --heads; "
                                          "default --heads)")->check(int_at_least(1));
  t->add_option("--intermediate", a.intermediate, "MLP width of --arch llama (default 8/3 of "
                                                  "--embd, rounded up to a multiple of 8)")
      ->check(int_at_least(1));
  t->add_flag("--tie", a.tie, "Tie --arch llama's lm_head to the token embedding "
                              "(Hugging Face's tie_word_embeddings)");
  t->add_option("--hidden", a.hidden, "Hidden width of --arch mlp")->check(int_at_least(1))->capture_default_str();
  t->add_option("--init", a.init, "Start from the weights of a .safetensors file");
  t->add_option("--resume", a.resume, "Continue the run saved in this folder");
  t->add_option("--seed", a.seed, "Seed of the initial weights, the batches and dropout")->capture_default_str();
  t->add_option("--batch", a.batch, "Sequences per update B")->check(int_at_least(1))->capture_default_str();
  t->add_option("--steps", a.steps, "Number of updates")->check(int_at_least(1))->capture_default_str();
  t->add_option("--epochs", a.epochs, "Epochs over the training images (--images; instead of --steps)")
      ->check(int_at_least(1));
  t->add_flag("--no-shuffle", a.no_shuffle, "Visit the training images in file order every epoch");
  t->add_option("--train-limit", a.train_limit, "Train on the first N training images only")
      ->check(int_at_least(1));
  t->add_option("--optimizer", a.optimizer, "adamw or sgd")
      ->check(CLI::IsMember({"adamw", "sgd"}))->capture_default_str();
  t->add_option("--lr", a.lr, "Peak learning rate")->check(real_in(0))->capture_default_str();
  t->add_option("--lr-min", a.lr_min, "Learning rate at the last update (cosine decay)")
      ->check(real_in(0))->capture_default_str();
  t->add_option("--warmup", a.warmup, "Linear warmup updates")->check(int_at_least(0))->capture_default_str();
  t->add_option("--beta1", a.beta1, "AdamW beta1")->check(real_in(0, 1))->capture_default_str();
  t->add_option("--beta2", a.beta2, "AdamW beta2")->check(real_in(0, 1))->capture_default_str();
  t->add_option("--eps", a.eps, "AdamW eps")->check(real_in(0))->capture_default_str();
  t->add_option("--weight-decay", a.weight_decay, "Decoupled weight decay of matrices (0 = off)")
      ->check(real_in(0))->capture_default_str();
  t->add_option("--momentum", a.momentum, "SGD momentum")->check(real_in(0))->capture_default_str();
  t->add_option("--grad-clip", a.grad_clip, "Clip the gradient norm to this (0 = off)")
      ->check(real_in(0))->capture_default_str();
  t->add_option("--eval-every", a.eval_every, "Evaluate (and save) every N updates (0 = off)")
      ->check(int_at_least(0))->capture_default_str();
  t->add_option("--eval-batches", a.eval_batches, "Batches per evaluation")
      ->check(int_at_least(1))->capture_default_str();
  t->add_flag("--checkpoint-blocks", a.checkpoint_blocks,
              "Recompute each block's activations in the backward instead of keeping them "
              "(gpt, llama): less memory, one more forward of the blocks");
  t->add_flag("--no-replay", a.no_replay,
              "Record every update's tape anew instead of replaying the recorded step (the "
              "numbers are the same)");
  t->add_option("--threads", a.threads,
                "Threads for the kernels, at most (fewer while other processes keep cores busy)")
      ->check(int_at_least(1));
  return t;
}

void finish_train_args(const CLI::App& train, TrainArgs& a, int argc, char** argv) {
  for (const CLI::Option* o : train.get_options())
    if (o->count() > 0 && !o->get_lnames().empty()) a.given.insert(o->get_lnames().front());
  std::string cmd = "tapegrad";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--resume") {
      ++i;  // and its value
      continue;
    }
    if (arg.rfind("--resume=", 0) == 0) continue;
    cmd += " " + shell_quote(arg);
  }
  a.command_line = cmd;
}

CLI::App* add_sample_command(CLI::App& app, SampleArgs& a) {
  auto* s = app.add_subcommand("sample", "Generate text from a model trained with --text");
  s->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  s->add_option("--ckpt", a.ckpt, "Folder with model.safetensors")->required();
  s->add_option("--prompt", a.prompt, "Text to continue (default: the vocabulary's first "
                                      "character, which prints first)");
  s->add_option("--tokens", a.tokens, "Characters to generate")->check(int_at_least(0))->capture_default_str();
  s->add_option("--temperature", a.temperature, "Softmax temperature (0 = greedy)")
      ->check(real_in(0))->capture_default_str();
  s->add_option("--top-k", a.top_k, "Draw from the K most likely characters only")
      ->check(int_at_least(1));
  s->add_option("--seed", a.seed, "Seed of the draws")->capture_default_str();
  return s;
}

CLI::App* add_inspect_command(CLI::App& app, InspectArgs& a) {
  auto* s = app.add_subcommand(
      "inspect", "Show a trained layer's attention (heatmaps, induction scores) and check it");
  s->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  s->add_option("--ckpt", a.ckpt, "Folder with model.safetensors (a gpt without biases, or a llama)")
      ->required();
  s->add_option("--layer", a.layer, "The layer, from 0 (default: the last)")
      ->check(int_at_least(0));
  s->add_option("--tokens", a.tokens, "Token ids, comma-separated (default: a repeated sequence "
                                      "of block_size tokens)")
      ->delimiter(',');
  s->add_flag("--check", a.check, "Also run the attention-invariant checker on the layer");
  return s;
}

}  // namespace tg
