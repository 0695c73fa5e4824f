// `tapegrad train` against nanoGPT's training loop in PyTorch eager (tests/gpt_train_reference.py),
// from the same safetensors weights (--init) and fixed batches (--batches): 12 AdamW updates with
// the warmup + cosine schedule and gradient clipping, for --arch gpt and --arch llama (against
// tests/llama_reference.py's independent Llama). In float64 every update's loss and
// gradient norm and every final weight agree to 1e-10 relative; in float32 the losses to 1e-4.
// Without python3, numpy and torch the suite skips, or fails when the environment variable CI is
// set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/llama.h>
#include "test_util.h"
#include "tools/train_cmd.h"

namespace tg {
namespace {

using test::TempDir;

constexpr int64_t kV = 11, kT = 8, kB = 4, kN = 3, kSteps = 12;

// The flags both sides run with (--name value), without the data, dtype and folder.
const std::vector<std::pair<std::string, std::string>> kFlags = {
    {"vocab", "11"},  {"block", "8"},       {"layers", "2"},        {"heads", "2"},
    {"embd", "16"},   {"steps", "12"},      {"lr", "0.01"},         {"lr-min", "0.001"},
    {"warmup", "3"},  {"beta1", "0.9"},     {"beta2", "0.99"},      {"eps", "1e-08"},
    {"weight-decay", "0.1"}, {"grad-clip", "0.5"}};

// The Llama's own flags (4 heads sharing 1 key/value head), beside kFlags.
const std::vector<std::pair<std::string, std::string>> kLlamaFlags = {
    {"arch", "llama"}, {"kv-heads", "1"}, {"intermediate", "24"}};

TrainArgs tapegrad_args(const TempDir& dir, const std::string& dtype, const std::string& arch) {
  TrainArgs a;
  a.batches = dir.file("batches.npy");
  a.init = dir.file("init.safetensors");
  a.out = dir.file("run");
  a.dtype = dtype;
  a.vocab = kV;
  a.block = kT;
  a.layers = 2;
  a.heads = 2;
  a.embd = 16;
  a.batch = kB;
  a.steps = kSteps;
  a.lr = 0.01;
  a.lr_min = 0.001;
  a.warmup = 3;
  a.beta1 = 0.9;
  a.beta2 = 0.99;
  a.eps = 1e-8;
  a.weight_decay = 0.1;
  a.grad_clip = 0.5;
  a.eval_every = 0;
  a.threads = 1;
  a.handle_sigint = false;
  a.given = {"batches", "init", "out", "dtype", "vocab", "block", "layers", "heads", "embd",
             "batch", "steps", "lr", "lr-min", "warmup", "beta1", "beta2", "eps",
             "weight-decay", "grad-clip", "eval-every", "threads"};
  if (arch == "llama") {
    a.arch = arch;
    a.heads = 4;
    a.kv_heads = 1;
    a.intermediate = 24;
    a.given.insert({"arch", "kv-heads", "intermediate"});
  }
  return a;
}

// One column of metrics.csv as numbers.
std::vector<double> column(const std::string& csv_path, int col) {
  std::istringstream csv(test::slurp(csv_path));
  std::string line;
  std::getline(csv, line);
  std::vector<double> out;
  while (std::getline(csv, line)) {
    std::stringstream row(line);
    std::string cell;
    for (int c = 0; c <= col; ++c) std::getline(row, cell, ',');
    out.push_back(std::stod(cell));
  }
  return out;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-300); }

// Writes the shared start (weights of a GPT or Llama drawn with seed 5, fixed random batches),
// runs both sides, and returns the folder.
void run_both(const TempDir& dir, const std::string& dtype, const std::string& arch = "gpt") {
  Rng rng(5);
  std::unique_ptr<nn::Module> model;
  if (arch == "gpt")
    model = std::make_unique<nn::GPT>(nn::GPTConfig{.vocab_size = kV, .block_size = kT,
                                                    .n_layer = 2, .n_head = 2, .n_embd = 16,
                                                    .dtype = Dtype::f64},
                                      rng);
  else
    model = std::make_unique<nn::Llama>(
        nn::LlamaConfig{.vocab_size = kV, .hidden_size = 16, .intermediate_size = 24,
                        .num_hidden_layers = 2, .num_attention_heads = 4,
                        .num_key_value_heads = 1, .max_position_embeddings = kT,
                        .dtype = Dtype::f64},
        rng);
  write_safetensors(dir.file("init.safetensors"), model->state_dict());
  std::filesystem::create_directories(dir / "init");
  for (const auto& [name, p] : model->state_dict()) write_npy(dir.file("init/" + name + ".npy"), p);
  std::vector<int64_t> tokens(kN * kB * (kT + 1));
  for (int64_t& t : tokens) t = static_cast<int64_t>(rng.uniform(0, kV));
  write_npy(dir.file("batches.npy"), from_indices(tokens, {kN, kB, kT + 1}));

  std::ostringstream progress;
  ASSERT_EQ(run_train(tapegrad_args(dir, dtype, arch), progress), 0) << progress.str();
  std::string cmd = test::kPython + " " + TAPEGRAD_GPT_TRAIN_REFERENCE_PY + " " + dir.path().string() +
                    " --dtype " + (dtype == "f64" ? "float64" : "float32");
  for (const auto& [flag, value] : kFlags)
    cmd += " --" + flag + " " + (flag == "heads" && arch == "llama" ? "4" : value);
  if (arch == "llama")
    for (const auto& [flag, value] : kLlamaFlags) cmd += " --" + flag + " " + value;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Every update's loss and gradient norm and every final weight (of `tensors` in the file)
// against PyTorch's, to 1e-10 relative, in float64.
void expect_float64_run_equal(const std::string& arch, std::size_t tensors) {
  TempDir dir;
  run_both(dir, "f64", arch);
  const std::vector<double> loss = column(dir.file("run/metrics.csv"), 2);
  const std::vector<double> norm = column(dir.file("run/metrics.csv"), 3);
  const Tensor torch_loss = read_npy(dir.file("torch/losses.npy"));
  const Tensor torch_norm = read_npy(dir.file("torch/grad_norms.npy"));
  ASSERT_EQ(loss.size(), static_cast<std::size_t>(kSteps));
  bool clipped = false;
  for (int64_t s = 0; s < kSteps; ++s) {
    EXPECT_LE(rel(loss[s], torch_loss.at({s})), 1e-10) << "loss of update " << s;
    EXPECT_LE(rel(norm[s], torch_norm.at({s})), 1e-10) << "gradient norm of update " << s;
    clipped = clipped || norm[s] > 0.5;
  }
  EXPECT_TRUE(clipped) << "the comparison should include clipped updates";
  EXPECT_LT(loss.back(), loss.front()) << "the run should learn something";
  const SafeTensors final_model = read_safetensors(dir.file("run/model.safetensors"));
  ASSERT_EQ(final_model.tensors.size(), tensors);
  for (const auto& [name, w] : final_model.tensors) {
    const std::vector<double> got = w.to_vector();
    const std::vector<double> want = read_npy(dir.file("torch/" + name + ".npy")).to_vector();
    ASSERT_EQ(got.size(), want.size()) << name;
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      diff = std::max(diff, std::fabs(got[i] - want[i]));
    }
    EXPECT_LE(diff, 1e-10 * scale) << name;
  }
}

TEST(GPTTraining, TwelveAdamWUpdatesEqualPyTorchsInFloat64) {
  TG_REQUIRE_PYTHON("numpy, torch");
  expect_float64_run_equal("gpt", 28);  // wte, wpe, 12 per block, ln_f's two
}

// The Llama's step agrees as the GPT's: grouped-query attention, RoPE, RMSNorm, SwiGLU.
TEST(LlamaTraining, TwelveAdamWUpdatesEqualPyTorchsInFloat64) {
  TG_REQUIRE_PYTHON("numpy, torch");
  expect_float64_run_equal("llama", 21);  // embed_tokens, 9 per layer, norm, lm_head
}

TEST(GPTTraining, FloatLossesEqualPyTorchsTo1e4) {
  TG_REQUIRE_PYTHON("numpy, torch");
  for (const char* arch : {"gpt", "llama"}) {
    SCOPED_TRACE(arch);
    TempDir dir;
    run_both(dir, "f32", arch);
    const std::vector<double> loss = column(dir.file("run/metrics.csv"), 2);
    const Tensor torch_loss = read_npy(dir.file("torch/losses.npy"));
    ASSERT_EQ(loss.size(), static_cast<std::size_t>(kSteps));
    for (int64_t s = 0; s < kSteps; ++s)
      EXPECT_LE(rel(loss[s], torch_loss.at({s})), 1e-4) << "loss of update " << s;
  }
}

}  // namespace
}  // namespace tg
