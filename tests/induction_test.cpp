// The induction-head experiment, short and seeded (docs/INDUCTION.md has the full one): on the
// induction task a 2-layer attention-only GPT learns to copy the token after the current one's
// earlier occurrence, a 1-layer one cannot (the negative control), and the trained second layer
// looks there (its heads' weights) and passes the attention-invariant checker.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/check/checker.h>
#include <tapegrad/data/induction.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include "test_util.h"
#include "tools/checkpoint.h"
#include "tools/inspect_cmd.h"
#include "tools/train_cmd.h"

namespace {

using tg::Tensor;
using tg::test::TempDir;

// 500 updates of the task at T = 16, V = 10: a 2-layer model reaches about 0.94 accuracy on the
// predictable targets by its last evaluation (before update 400), a 1-layer one stays near 0.16.
tg::TrainArgs induction_run(const std::string& out, int64_t layers) {
  tg::TrainArgs a;
  a.task = "induction";
  a.out = out;
  a.vocab = 10;
  a.block = 16;
  a.layers = layers;
  a.heads = 4;
  a.embd = 128;
  a.attention_only = true;
  a.no_bias = true;
  a.batch = 32;
  a.steps = 500;
  a.lr = 2e-3;
  a.lr_min = 1e-4;
  a.warmup = 50;
  a.weight_decay = 0;
  a.eval_every = 100;
  a.eval_batches = 10;
  a.threads = 1;
  a.handle_sigint = false;
  a.given = {"task", "out", "vocab", "block", "layers", "heads", "embd", "attention-only",
             "no-bias", "batch", "steps", "lr", "lr-min", "warmup", "weight-decay", "eval-every",
             "eval-batches", "threads"};
  return a;
}

// The accuracy column of the last evaluated row of metrics.csv.
double final_accuracy(const std::string& dir) {
  std::istringstream csv(tg::test::slurp(dir + "/metrics.csv"));
  std::string line, last;
  std::getline(csv, line);  // header
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string c; std::getline(row, c, ',');) cells.push_back(c);
    if (cells.size() > 5 && !cells[5].empty()) last = cells[5];
  }
  return last.empty() ? -1 : std::stod(last);
}

TEST(Induction, TwoLayersLearnToCopyOneLayerCannotAndTheStripeShows) {
  TempDir dir;
  std::ostringstream progress;
  ASSERT_EQ(tg::run_train(induction_run(dir.file("two"), 2), progress), 0) << progress.str();
  ASSERT_EQ(tg::run_train(induction_run(dir.file("one"), 1), progress), 0) << progress.str();
  const double two = final_accuracy(dir.file("two")), one = final_accuracy(dir.file("one"));
  EXPECT_GT(two, 0.85) << "2 layers should form an induction head";
  EXPECT_LT(one, 0.5) << "1 layer cannot: it has no previous-token head to compose with";

  // The trained layers on 32 of the task's own sequences (a seed apart from training's): each
  // head's weight on the tokens right after the current one's earlier occurrences, averaged over
  // the sequences, against uniform causal weights' on the same sequences (chance, about 0.11).
  // Some second-layer head puts at least twice chance there (0.36 and 0.27 seen: in 500 updates
  // the copying is shared among the heads, and how it is shared moves with an op's last bits, so
  // one fixed sequence's best head moved from 0.39 to 0.23); the first layer's heads stay far
  // below (0.03).
  const std::string path = dir.file("two") + "/model.safetensors";
  tg::ckpt::ModelFile file = tg::ckpt::read_model(path);
  tg::ckpt::load_weights(*file.model, std::move(file.tensors), path);
  auto& model = dynamic_cast<tg::nn::GPT&>(file.model->module());
  model.eval();
  tg::AttentionOptions o;
  o.heads = 4;
  o.need_weights = true;
  const tg::AttentionFn attention = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return tg::multi_head_attention(x, p[0], p[1], p[2], p[3], o);
  };
  constexpr int64_t kSeqs = 32, T = 16, H = 4;
  tg::Rng rng(2024);
  const std::vector<double> xs = tg::data::induction_batch(kSeqs, T, 10, rng).x.to_vector();
  auto sequence = [&](int64_t b) {
    return std::vector<int64_t>(xs.begin() + b * T, xs.begin() + (b + 1) * T);
  };
  auto best_induction = [&](int64_t layer) {
    const std::vector<Tensor> W = model.attention_weights(layer);
    std::vector<double> mean(H, 0.0);
    for (int64_t b = 0; b < kSeqs; ++b) {
      const std::vector<int64_t> tokens = sequence(b);
      const Tensor x = model.attention_input(tg::from_indices(tokens, {1, T}), layer);
      const Tensor A = tg::reshape(attention(x, W).A, {H, T, T});
      const std::vector<tg::HeadScores> s = tg::head_scores(A, tokens);
      for (int64_t h = 0; h < H; ++h) mean[h] += s[h].induction / kSeqs;
    }
    return *std::max_element(mean.begin(), mean.end());
  };
  std::vector<double> uniform(T * T, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j <= t; ++j) uniform[t * T + j] = 1.0 / double(t + 1);
  const Tensor U = tg::from_vector(uniform, {1, T, T});
  double chance = 0;
  for (int64_t b = 0; b < kSeqs; ++b)
    chance += tg::head_scores(U, sequence(b))[0].induction / kSeqs;
  const double second = best_induction(1), first = best_induction(0);
  std::printf("induction weight, best head (mean over %lld sequences): second layer %.3f, first "
              "layer %.3f, chance %.3f\n",
              static_cast<long long>(kSeqs), second, first, chance);
  EXPECT_GT(chance, 0.05);  // (the measure's own premise: the sequences repeat)
  EXPECT_GT(second, 2 * chance) << "first layer " << first;
  EXPECT_LT(first, second / 3) << "second layer " << second;
  const std::vector<int64_t> tokens = tg::repeated_sequence(T, 10);
  const Tensor idx = tg::from_indices(tokens, {1, T});

  // The lesson's invariants hold on the trained layer (gradients in fast mode).
  std::vector<Tensor> W;
  for (const Tensor& w : model.attention_weights(1)) W.push_back(w.detach().clone());
  tg::CheckerOptions options;
  options.gradcheck.fast_mode = true;
  const tg::InvariantReport report =
      tg::check_attention(attention, model.attention_input(idx, 1).detach(), W, options);
  EXPECT_TRUE(report.passed()) << report.str();
}

}  // namespace
