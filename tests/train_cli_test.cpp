// `tapegrad train` and `tapegrad sample` as a user runs them (a subprocess on files in temporary
// folders), and the sampler's KV-cache generation against full forwards (in-process):
//   a tiny run:   the four files, the CSV header and one row per update, the loss going down
//   --resume:     2 x 25 updates equal 50 bit for bit (float64 and float32), and so does a run
//                 stopped by Ctrl-C and resumed, with the cosine schedule
//   sample:       deterministic for a seed; greedy with the cache equals greedy by full forwards
//   bad input:    exit 1 or 2, one line on stderr naming the problem, --out as it was

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "csv_util.h"
#include <tapegrad/data/tokenizer.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/gpt_config.h>
#include <tapegrad/nn/llama_config.h>
#include "tools/arch.h"
#include "tools/sample_cmd.h"
#include "tools/train_cmd.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::Outcome;
using test::repetitive_text;
using test::slurp;
using test::spit;
using test::TempDir;

const std::string kExe = TAPEGRAD_EXE;

Outcome run(const std::vector<std::string>& args) { return test::run(kExe, args); }

using test::cells;
using test::lines;

// The metrics rows without the timing columns (tokens_per_s, elapsed_s), which differ by run.
std::string metrics_without_timing(const std::string& dir) {
  std::string out;
  for (const std::string& l : lines(slurp(dir + "/metrics.csv"))) {
    const std::vector<std::string> c = cells(l);
    for (std::size_t i = 0; i < 6 && i < c.size(); ++i) out += c[i] + (i < 5 ? "," : "\n");
  }
  return out;
}

// Flags of a tiny model on `text` that trains in well under a second.
std::vector<std::string> tiny(const std::string& text, const std::string& out,
                              std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"train", "--text", text, "--out", out, "--layers", "2",
                                "--heads", "2", "--embd", "16", "--block", "16", "--batch", "4",
                                "--eval-batches", "2", "--threads", "1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(TrainCli, TinyTextRunWritesFilesAndLearns) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  const Outcome r = run(tiny(dir / "text.txt", dir / "run",
                             {"--embd", "32", "--block", "32", "--batch", "8", "--steps", "60",
                              "--lr", "1e-2", "--lr-min", "1e-2", "--warmup", "0",
                              "--eval-every", "20"}));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"model.safetensors", "train_state.safetensors", "metrics.csv", "loss.svg"})
    EXPECT_TRUE(fs::is_regular_file(dir / ("run/" + std::string(f)))) << f;
  const std::vector<std::string> rows = lines(slurp(dir / "run/metrics.csv"));
  ASSERT_EQ(rows.size(), 61u);
  EXPECT_EQ(rows[0], "step,lr,loss,grad_norm,val_loss,accuracy,tokens_per_s,elapsed_s");
  double first = 0, last = 0;
  for (int s = 0; s < 60; ++s) {
    const std::vector<std::string> c = cells(rows[s + 1]);
    ASSERT_EQ(c.size(), 8u) << rows[s + 1];
    EXPECT_EQ(c[0], std::to_string(s));
    EXPECT_EQ(c[1], "0.01");
    EXPECT_EQ(c[4].empty(), s % 20 != 0) << rows[s + 1];  // evaluated before updates 0, 20, 40
    EXPECT_TRUE(c[5].empty());                             // accuracy: induction task only
    if (s < 10) first += std::stod(c[2]) / 10;
    if (s >= 50) last += std::stod(c[2]) / 10;
  }
  EXPECT_LT(last, 0.6 * first) << "mean loss of the first 10 updates " << first
                               << ", of the last 10 " << last;
  const std::string svg = slurp(dir / "run/loss.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("validation loss"), std::string::npos);
  const SafeTensors model = read_safetensors(dir / "run/model.safetensors");
  EXPECT_EQ(model.metadata.at("tapegrad.vocab"), data::CharTokenizer::from_text(repetitive_text()).vocab());
  EXPECT_NE(model.metadata.at("tapegrad.config").find("\"n_embd\":32"), std::string::npos);
}

TEST(TrainCli, InductionTaskReportsAccuracy) {
  TempDir dir;
  const Outcome r = run({"train", "--task", "induction", "--vocab", "12", "--block", "12",
                         "--layers", "2", "--heads", "2", "--embd", "16", "--batch", "4",
                         "--steps", "4", "--eval-every", "2", "--eval-batches", "2", "--out",
                         dir / "run"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> rows = lines(slurp(dir / "run/metrics.csv"));
  ASSERT_EQ(rows.size(), 5u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(cells(rows[s + 1])[5].empty(), s % 2 != 0) << rows[s + 1];
  const SafeTensors model = read_safetensors(dir / "run/model.safetensors");
  EXPECT_EQ(model.metadata.count("tapegrad.vocab"), 0u);
}

// `tapegrad inspect` on a model without biases: a heatmap per head and its scores, the checker's
// report with --check; a model with biases is refused with one line naming why.
TEST(InspectCli, ShowsEveryHeadAndRunsTheChecker) {
  TempDir dir;
  const std::vector<std::string> model = {"--task", "induction", "--vocab", "12", "--block", "12",
                                          "--layers", "2", "--heads", "2", "--embd", "16",
                                          "--batch", "4", "--steps", "2", "--eval-every", "0"};
  // plain: without biases, as the lesson's layer; biased: tapegrad train's default.
  std::vector<std::string> plain = {"train", "--no-bias"}, biased = {"train"};
  for (auto* a : {&plain, &biased}) a->insert(a->end(), model.begin(), model.end());
  plain.insert(plain.end(), {"--out", (dir / "plain").string()});
  biased.insert(biased.end(), {"--out", (dir / "biased").string()});
  ASSERT_EQ(run(plain).status, 0);
  ASSERT_EQ(run(biased).status, 0);

  const Outcome r = run({"inspect", "--ckpt", dir / "plain", "--layer", "1", "--check"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("layer 1 of 2, tokens 0 1 2 3 0 1 2 3 0 1 2 3"), std::string::npos) << r.out;
  for (const char* head : {"head 0: mean weight on the previous token", "head 1:"})
    EXPECT_NE(r.out.find(head), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS  causality through autodiff"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;

  const Outcome bad = run({"inspect", "--ckpt", dir / "biased"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("has biases"), std::string::npos) << bad.err;
  EXPECT_EQ(lines(bad.err).size(), 1u) << bad.err;
}

class Resume : public testing::TestWithParam<std::string> {};

TEST_P(Resume, TwoRunsOf25EqualOneOf50) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  // A constant rate, so that a run of 25 updates has the first 25 rates of a run of 50; dropout
  // on, so the dropout generator's state has to survive too.
  const std::vector<std::string> flags = {"--lr", "1e-2", "--lr-min", "1e-2", "--warmup", "0",
                                          "--eval-every", "10", "--dropout", "0.1",
                                          "--dtype", GetParam()};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), flags.begin(), flags.end());
    return more;
  };
  ASSERT_EQ(run(tiny(dir / "text.txt", dir / "whole", with({"--steps", "50"}))).status, 0);
  ASSERT_EQ(run(tiny(dir / "text.txt", dir / "part", with({"--steps", "25"}))).status, 0);
  EXPECT_EQ(lines(slurp(dir / "part/metrics.csv")).size(), 26u);
  const Outcome r = run(tiny(dir / "text.txt", dir / "part",
                             with({"--steps", "50", "--resume", dir / "part"})));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(metrics_without_timing(dir / "whole"), metrics_without_timing(dir / "part"));
  EXPECT_TRUE(slurp(dir / "whole/model.safetensors") == slurp(dir / "part/model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(TrainCli, Resume, testing::Values("f64", "f32"));

// --arch llama from the command line: two runs of 25 updates equal one of 50, sample continues
// its text, and --out is a pretrained folder (config.json with Hugging Face's keys beside
// model.safetensors) that from_pretrained loads into the run's model.
TEST(TrainCli, LlamaRunResumesSamplesAndIsAPretrainedFolder) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  const std::vector<std::string> flags = {"--arch", "llama", "--heads", "4", "--kv-heads", "2",
                                          "--lr", "1e-2", "--lr-min", "1e-2", "--warmup", "0",
                                          "--eval-every", "10"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), flags.begin(), flags.end());
    return more;
  };
  const Outcome whole = run(tiny(dir / "text.txt", dir / "whole", with({"--steps", "50"})));
  ASSERT_EQ(whole.status, 0) << whole.err;
  EXPECT_NE(whole.err.find("wrote model.safetensors, config.json,"), std::string::npos) << whole.err;
  ASSERT_EQ(run(tiny(dir / "text.txt", dir / "part", with({"--steps", "25"}))).status, 0);
  const Outcome r = run(tiny(dir / "text.txt", dir / "part",
                             with({"--steps", "50", "--resume", dir / "part"})));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(metrics_without_timing(dir / "whole"), metrics_without_timing(dir / "part"));
  EXPECT_TRUE(slurp(dir / "whole/model.safetensors") == slurp(dir / "part/model.safetensors"));
  const std::vector<double> loss = [&] {
    std::vector<double> v;
    for (const std::string& l : lines(slurp(dir / "whole/metrics.csv")))
      if (l.rfind("step", 0) != 0) v.push_back(std::stod(cells(l)[2]));
    return v;
  }();
  ASSERT_EQ(loss.size(), 50u);
  EXPECT_LT(loss.back(), 0.8 * loss.front()) << "the Llama should learn the repetitive text";

  const Outcome s = run({"sample", "--ckpt", dir / "whole", "--tokens", "40", "--prompt", "the "});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out.rfind("the ", 0), 0u) << s.out;
  EXPECT_GE(s.out.size(), 44u) << s.out;

  const std::string config = slurp(dir / "whole/config.json");
  for (const char* key : {"\"architectures\":[\"LlamaForCausalLM\"]", "\"model_type\":\"llama\"",
                          "\"num_key_value_heads\":2", "\"hidden_size\":16",
                          "\"intermediate_size\":48", "\"max_position_embeddings\":16"})
    EXPECT_NE(config.find(key), std::string::npos) << key << " in " << config;
  const auto pretrained = nn::from_pretrained(dir / "whole");
  const SafeTensors file = read_safetensors(dir / "whole/model.safetensors");
  const NamedTensors state = pretrained->state_dict();
  ASSERT_EQ(state.size(), file.tensors.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].first, file.tensors[i].first);
    EXPECT_EQ(state[i].second.to_vector(), file.tensors[i].second.to_vector()) << state[i].first;
  }
}

// Ctrl-C mid-run with the cosine schedule and warmup: the resumed run ends where the run never
// stopped ends.
// --checkpoint-blocks changes how the backward computes, not what it computes: with dropout on,
// the weights after 6 updates are the plain run's, bit for bit, for a GPT and a Llama.
TEST(TrainCli, CheckpointBlocksTrainsTheSameWeights) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  for (const std::vector<std::string>& arch :
       {std::vector<std::string>{"--dropout", "0.2"}, std::vector<std::string>{"--arch", "llama"}}) {
    SCOPED_TRACE(arch[1]);
    std::vector<std::string> flags = arch;
    for (const char* f : {"--steps", "6", "--eval-every", "0", "--lr", "1e-2"}) flags.push_back(f);
    const std::string plain = dir / ("plain" + arch[1]), kept = dir / ("kept" + arch[1]);
    ASSERT_EQ(run(tiny(dir / "text.txt", plain, flags)).status, 0);
    flags.push_back("--checkpoint-blocks");
    const Outcome r = run(tiny(dir / "text.txt", kept, flags));
    ASSERT_EQ(r.status, 0) << r.err;
    const SafeTensors a = read_safetensors(plain + "/model.safetensors");
    const SafeTensors b = read_safetensors(kept + "/model.safetensors");
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
      ASSERT_EQ(a.tensors[i].first, b.tensors[i].first);
      const Tensor& x = a.tensors[i].second;
      const Tensor& y = b.tensors[i].second;
      ASSERT_EQ(x.shape(), y.shape()) << a.tensors[i].first;
      EXPECT_EQ(x.to_vector(), y.to_vector()) << a.tensors[i].first;
    }
    // The losses too; and the weights moved (the comparison is not of two untrained models).
    EXPECT_EQ(metrics_without_timing(plain), metrics_without_timing(kept));
    const std::vector<std::string> rows = lines(slurp(plain + "/metrics.csv"));
    EXPECT_NE(cells(rows[1])[2], cells(rows.back())[2]);
  }
}

// A run replays its step (a StaticStep) from its third update on; --no-replay records every
// update anew. The weights and losses after 6 updates are the same bit for bit, for a GPT with
// dropout and a Llama; the negative control: another seed trains other weights, and the
// comparison sees it.
TEST(TrainCli, ReplayedStepsTrainTheSameWeightsAsRecordedOnes) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  auto weights = [](const std::string& folder) {
    std::vector<std::vector<double>> w;
    for (const auto& [name, t] : read_safetensors(folder + "/model.safetensors").tensors)
      w.push_back(t.to_vector());
    return w;
  };
  using Flags = std::vector<std::string>;
  for (const Flags& arch : {Flags{"--dropout", "0.2"}, Flags{"--arch", "llama"}}) {
    SCOPED_TRACE(arch[1]);
    std::vector<std::string> flags = arch;
    for (const char* f : {"--steps", "6", "--eval-every", "3", "--lr", "1e-2"}) flags.push_back(f);
    const std::string replayed = dir / ("replayed" + arch[1]);
    const std::string recorded = dir / ("recorded" + arch[1]), other = dir / ("other" + arch[1]);
    Outcome r = run(tiny(dir / "text.txt", replayed, flags));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("6 updates done (4 replayed);"), std::string::npos) << r.err;
    std::vector<std::string> seeded = flags;
    seeded.insert(seeded.end(), {"--seed", "5"});
    ASSERT_EQ(run(tiny(dir / "text.txt", other, seeded)).status, 0);
    flags.push_back("--no-replay");
    r = run(tiny(dir / "text.txt", recorded, flags));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("6 updates done;"), std::string::npos) << r.err;
    EXPECT_EQ(weights(replayed), weights(recorded));
    EXPECT_EQ(metrics_without_timing(replayed), metrics_without_timing(recorded));
    EXPECT_NE(weights(replayed), weights(other));
  }
}

TEST(TrainCli, InterruptedRunResumesExactly) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  const std::vector<std::string> flags = tiny(
      dir / "text.txt", dir / "stopped",
      {"--layers", "1", "--embd", "8", "--block", "8", "--steps", "1500", "--warmup", "100",
       "--lr", "1e-2", "--eval-every", "300", "--dtype", "f64", "--seed", "7"});
  const std::string err = dir / "err";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(kExe.c_str())};
    for (const std::string& a : flags) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::FILE* e = std::freopen(err.c_str(), "w", stderr);
    if (e == nullptr) ::_exit(99);
    ::execv(kExe.c_str(), argv.data());
    ::_exit(98);
  }
  // The first progress line comes after update 1: interrupt from then on.
  for (int i = 0; i < 2000 && slurp(err).find("step 1/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(err);
  ASSERT_EQ(WEXITSTATUS(status), 130) << "the run ended before Ctrl-C reached it?\n" << slurp(err);
  EXPECT_NE(slurp(err).find("--resume " + dir.file("stopped")), std::string::npos) << slurp(err);
  const std::size_t done = lines(slurp(dir / "stopped/metrics.csv")).size() - 1;
  EXPECT_GT(done, 0u);
  EXPECT_LT(done, 1500u);

  std::vector<std::string> resume = flags;
  resume.insert(resume.end(), {"--resume", dir / "stopped"});
  ASSERT_EQ(run(resume).status, 0);
  std::vector<std::string> whole = flags;
  std::replace(whole.begin(), whole.end(), dir.file("stopped"), dir.file("whole"));
  ASSERT_EQ(run(whole).status, 0);
  EXPECT_EQ(metrics_without_timing(dir / "whole"), metrics_without_timing(dir / "stopped"));
  EXPECT_TRUE(slurp(dir / "whole/model.safetensors") == slurp(dir / "stopped/model.safetensors"));
}

TEST(SampleCli, DeterministicForASeedAndNamesAForeignCharacter) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  ASSERT_EQ(run(tiny(dir / "text.txt", dir / "run", {"--steps", "5"})).status, 0);
  const std::vector<std::string> args = {"sample", "--ckpt", dir / "run", "--prompt", "hello",
                                         "--tokens", "40", "--seed", "3", "--top-k", "5"};
  const Outcome a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.size(), 5u + 40u);
  EXPECT_EQ(a.out.substr(0, 5), "hello");
  const Outcome greedy = run({"sample", "--ckpt", dir / "run", "--temperature", "0", "--tokens",
                              "10"});
  ASSERT_EQ(greedy.status, 0) << greedy.err;
  EXPECT_EQ(greedy.out.size(), 1u + 10u);  // the vocabulary's first character, then 10
  const Outcome foreign = run({"sample", "--ckpt", dir / "run", "--prompt", "hellZ"});
  EXPECT_EQ(foreign.status, 1);
  EXPECT_NE(foreign.err.find("'Z'"), std::string::npos) << foreign.err;
  EXPECT_TRUE(foreign.out.empty());
}

// Greedy generation with the KV cache (including the crops past block_size) picks the same
// tokens as a full forward over the cropped context at every step.
TEST(Sample, GreedyWithCacheEqualsFullForwards) {
  const nn::GPTConfig c{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                       .dtype = Dtype::f64};
  Rng init(5);
  const std::unique_ptr<Model> model = find_arch("gpt")->build(nn::gpt_config_to_json(c), init);
  model->module().eval();
  Rng rng(0);
  const std::vector<int64_t> prompt = {3, 1, 4};
  const std::vector<int64_t> cached = generate(*model->decoder(), prompt, 20, 0.0, 0, rng);
  std::vector<int64_t> ctx = prompt, full;
  for (int i = 0; i < 20; ++i) {
    const std::vector<int64_t> window(ctx.end() - std::min<std::ptrdiff_t>(ctx.size(), 8), ctx.end());
    const auto T = static_cast<int64_t>(window.size());
    const std::vector<double> logits = model->forward(from_indices(window, {1, T})).to_vector();
    const auto last = logits.end() - c.vocab_size;
    full.push_back(std::max_element(last, logits.end()) - last);
    ctx.push_back(full.back());
  }
  EXPECT_EQ(cached, full);
}

// ---- bad input --------------------------------------------------------------------------------

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return len + header + data;
}

struct BadCase {
  std::string name;
  std::vector<std::string> args;  // {dir} stands for the test's folder
  int status;
  std::string fragment;
};

TEST(TrainCli, BadInputExitsWithOneLineAndLeavesOutAsItWas) {
  TempDir dir;
  const std::string text = repetitive_text();
  spit(dir / "text.txt", text);
  spit(dir / "short.txt", "abcdefgh");
  ASSERT_EQ(run(tiny(dir / "text.txt", dir / "good", {"--steps", "1"})).status, 0);
  const std::string good = slurp(dir / "good/model.safetensors");
  spit(dir / "truncated.st", good.substr(0, good.size() / 2));
  spit(dir / "past_end.st", std::string("\x40\x42\x0f\0\0\0\0\0", 8) + "{}");
  spit(dir / "overlap.st", safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')));
  spit(dir / "dtype.st", safetensors_bytes(
      R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')));
  spit(dir / "shape.st", safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}})", std::string(8, '\0')));
  {  // every tensor of the tiny model, one of the wrong shape
    SafeTensors st = read_safetensors(dir / "good/model.safetensors");
    for (auto& [name, t] : st.tensors)
      if (name == "transformer.h.1.mlp.c_fc.weight") t = zeros({64, 8}, Dtype::f32);
    write_safetensors(dir / "wrong_shape.st", st.tensors);
  }
  {  // the good run, its model recorded as one of an architecture this program does not know
     // (in the train state, which --resume reads, and in model.safetensors, which sample reads)
    fs::create_directories(dir / "foreign");
    fs::copy_file(dir / "good/metrics.csv", dir / "foreign/metrics.csv");
    for (const std::string f : {"train_state.safetensors", "model.safetensors"}) {
      SafeTensors st = read_safetensors(dir / ("good/" + f));
      st.metadata["tapegrad.arch"] = "mamba";
      write_safetensors(dir / ("foreign/" + f), st.tensors, st.metadata);
    }
  }
  write_npy(dir / "float.npy", zeros({2, 2, 5}, Dtype::f64));
  write_npy(dir / "rank2.npy", from_indices({1, 2, 3, 4}, {2, 2}));
  write_npy(dir / "big_token.npy", from_indices({0, 1, 2, 3, 9, 0, 1, 2, 3, 4}, {1, 2, 5}));
  fs::create_directories(dir / "empty");

  const std::string T = dir / "text.txt";
  const auto init = [&](const std::string& file) { return tiny(T, dir / "out", {"--init", dir / file}); };
  const auto task = [&](std::vector<std::string> more) {
    std::vector<std::string> a = {"train", "--out", dir / "out"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const std::vector<BadCase> cases = {
      {"init truncated", init("truncated.st"), 1, "truncated"},
      {"init header past the end", init("past_end.st"), 1, "past the end"},
      {"init overlapping offsets", init("overlap.st"), 1, "overlap"},
      {"init unknown dtype", init("dtype.st"), 1, "Q4"},
      {"init shape vs bytes", init("shape.st"), 1, "(2, 3)"},
      {"init tensor of the wrong shape", init("wrong_shape.st"), 1, "transformer.h.1.mlp.c_fc.weight"},
      {"batches of floats", task({"--batches", dir / "float.npy", "--vocab", "10"}), 1, "float"},
      {"batches of rank 2", task({"--batches", dir / "rank2.npy", "--vocab", "10"}), 1, "rank"},
      {"batches token >= vocab", task({"--batches", dir / "big_token.npy", "--vocab", "5"}), 1, "9"},
      {"text shorter than block + 1", tiny(dir / "short.txt", dir / "out"), 1, "--block + 1"},
      {"two data sources", task({"--text", T, "--task", "induction", "--vocab", "40"}), 2, "one data source"},
      {"resume an empty folder", tiny(T, dir / "out", {"--resume", dir / "empty"}), 1, "nothing to resume"},
      {"task without vocab", task({"--task", "induction"}), 2, "--vocab"},
      {"gelu foo", tiny(T, dir / "out", {"--gelu", "foo"}), 2, "--gelu"},
      {"dtype f16", tiny(T, dir / "out", {"--dtype", "f16"}), 2, "--dtype"},
      {"checkpoint-blocks with --arch mlp",
       task({"--images", "/usr/share/datasets/fashion-mnist", "--arch", "mlp", "--train-limit",
             "128", "--epochs", "1", "--checkpoint-blocks"}),
       2, "--checkpoint-blocks: --arch mlp has no blocks to checkpoint"},
      {"batch 0", tiny(T, dir / "out", {"--batch", "0"}), 2, "--batch"},
      {"init and resume", tiny(T, dir / "out", {"--init", dir / "good/model.safetensors",
                                                "--resume", dir / "good"}), 2, "--resume"},
      {"heads not dividing embd", tiny(T, dir / "out", {"--heads", "3"}), 2, "--heads 3"},
      {"unknown arch", tiny(T, dir / "out", {"--arch", "mamba"}), 2, "--arch must be gpt, llama, cnn or mlp, got 'mamba'"},
      {"resume an unknown arch", tiny(T, dir / "out", {"--resume", dir / "foreign"}), 1,
       "tapegrad.arch 'mamba' is not an architecture this program knows (gpt, llama, cnn or mlp)"},
      {"sample an unknown arch", {"sample", "--ckpt", dir / "foreign"}, 1, "tapegrad.arch 'mamba'"},
      {"images with --arch gpt", task({"--images", dir / "empty", "--arch", "gpt"}), 2,
       "--images needs an image architecture"},
      {"images with --steps", task({"--images", dir / "empty", "--steps", "5"}), 2,
       "--epochs, not --steps"},
      {"epochs without images", tiny(T, dir / "out", {"--epochs", "2"}), 2, "--epochs goes with --images"},
      {"--arch cnn on text", tiny(T, dir / "out", {"--arch", "cnn"}), 2, "--arch cnn trains on --images"},
      {"gpt flag with --arch llama", tiny(T, dir / "out", {"--arch", "llama", "--gelu", "erf"}), 2,
       "--gelu is not a flag of --arch llama"},
      {"llama flag with --arch gpt", tiny(T, dir / "out", {"--kv-heads", "1"}), 2,
       "--kv-heads is not a flag of --arch gpt"},
      {"tie with --arch gpt", tiny(T, dir / "out", {"--tie"}), 2, "--tie is not a flag of --arch gpt"},
      {"kv-heads not dividing heads", tiny(T, dir / "out", {"--arch", "llama", "--kv-heads", "3"}),
       2, "--kv-heads 3 must divide --heads 2"},
      {"dropout with --arch llama", tiny(T, dir / "out", {"--arch", "llama", "--dropout", "0.1"}),
       2, "--arch llama has no dropout"},
      {"images folder without IDX files", task({"--images", dir / "empty"}), 1,
       "train-images-idx3-ubyte"},
      {"epochs past what a run counts",
       task({"--images", "/usr/share/datasets/fashion-mnist", "--train-limit", "128", "--epochs",
             "9223372036854775807"}),
       2, "more updates than a run can count"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    // --out exists with a file of its own, which must stay the only thing in it.
    fs::remove_all(dir / "out");
    fs::create_directories(dir / "out");
    spit(dir / "out/keep.txt", "mine");
    const Outcome r = run(c.args);
    EXPECT_FALSE(r.crashed) << r.err;
    EXPECT_EQ(r.status, c.status) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(test::files_in(dir / "out"), std::set<std::string>{"keep.txt"});
  }
}

}  // namespace
}  // namespace tg
