// The induction-head experiment, short and seeded (docs/INDUCTION.md has the full one): on the
// induction task a 2-layer attention-only GPT learns to copy the token after the current one's
// earlier occurrence, a 1-layer one cannot (the negative control), and the trained second layer
// shows the stripe and passes the attention-invariant checker.

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/check/checker.h>
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

  // The trained second layer on a repeated sequence: some head puts most of its weight on the
  // tokens right after the current one's earlier occurrences; the first layer's do not.
  const std::string path = dir.file("two") + "/model.safetensors";
  tg::ckpt::ModelFile file = tg::ckpt::read_model(path);
  tg::ckpt::load_weights(*file.model, std::move(file.tensors), path);
  auto& model = dynamic_cast<tg::nn::GPT&>(file.model->module());
  model.eval();
  const std::vector<int64_t> tokens = tg::repeated_sequence(16, 10);
  const Tensor idx = tg::from_indices(tokens, {1, 16});
  tg::AttentionOptions o;
  o.heads = 4;
  o.need_weights = true;
  const tg::AttentionFn attention = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return tg::multi_head_attention(x, p[0], p[1], p[2], p[3], o);
  };
  auto best_induction = [&](int64_t layer) {
    const std::vector<Tensor> W = model.attention_weights(layer);
    const Tensor A = tg::reshape(attention(model.attention_input(idx, layer), W).A, {4, 16, 16});
    double best = 0;
    for (const tg::HeadScores& s : tg::head_scores(A, tokens)) best = std::max(best, s.induction);
    return best;
  };
  const double second = best_induction(1), first = best_induction(0);
  EXPECT_GT(second, 0.3);
  EXPECT_GT(second, 3 * first);

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
