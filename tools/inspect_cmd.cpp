// `tapegrad inspect`: a trained layer's attention through the lesson's multi_head_attention
// (nn::GPT::attention_weights gives its W_Q, W_K, W_V, W_O), so the same heatmaps and the same
// invariant checker as the demo apply to a model that learned.

#include "tools/inspect_cmd.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/ops/ops.h>
#include "tools/checkpoint.h"
#include "tools/heatmap.h"

namespace tg {

std::vector<int64_t> repeated_sequence(int64_t T, int64_t vocab_size) {
  const int64_t P = std::min((T + 2) / 3, vocab_size);
  std::vector<int64_t> s(T);
  for (int64_t t = 0; t < T; ++t) s[t] = t % P;
  return s;
}

std::vector<HeadScores> head_scores(const Tensor& A, const std::vector<int64_t>& tokens) {
  const int64_t H = A.size(0), T = A.size(1);
  std::vector<HeadScores> out(H);
  for (int64_t h = 0; h < H; ++h) {
    int64_t n_prev = 0, n_ind = 0;
    for (int64_t t = 1; t < T; ++t) {
      out[h].previous_token += A.at({h, t, t - 1});
      ++n_prev;
      // Every earlier occurrence j of tokens[t]: an induction head looks one past them.
      double w = 0;
      bool seen = false;
      for (int64_t j = 0; j < t; ++j)
        if (tokens[j] == tokens[t]) {
          w += A.at({h, t, j + 1});
          seen = true;
        }
      if (seen) {
        out[h].induction += w;
        ++n_ind;
      }
    }
    out[h].previous_token /= std::max<int64_t>(n_prev, 1);
    out[h].induction /= std::max<int64_t>(n_ind, 1);
  }
  return out;
}

namespace {

// The GPT a checkpoint's model is: the lesson's attention is a GPT's (attention_weights).
const nn::GPT& gpt_of(const Model& model, const std::string& path) {
  const auto* gpt = dynamic_cast<const nn::GPT*>(&model.module());
  if (gpt == nullptr)
    throw ValueError(path + ": a " + model.arch().name + " model; inspect shows a GPT's attention");
  return *gpt;
}

}  // namespace

int run_inspect(const InspectArgs& args, std::ostream& out) {
  const std::string path = (std::filesystem::path(args.ckpt) / "model.safetensors").string();
  ckpt::ModelFile file = ckpt::read_model(path);
  ckpt::load_weights(*file.model, std::move(file.tensors), path);
  file.model->module().eval();
  const nn::GPT& model = gpt_of(*file.model, path);
  const nn::GPTConfig& c = model.config();
  const int64_t layer = args.layer < 0 ? c.n_layer - 1 : args.layer;
  const std::vector<int64_t> tokens =
      args.tokens.empty() ? repeated_sequence(c.block_size, c.vocab_size) : args.tokens;
  const int64_t T = static_cast<int64_t>(tokens.size());

  const Tensor X = model.attention_input(from_indices(tokens, {1, T}), layer);  // (1, T, C)
  NoGradGuard no_grad;
  std::vector<Tensor> W;  // W_Q, W_K, W_V, W_O, as leaves of their own
  for (const Tensor& w : model.attention_weights(layer)) W.push_back(w.detach().clone());
  AttentionOptions o;
  o.heads = c.n_head;
  o.need_weights = true;
  const AttentionFn attention = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return multi_head_attention(x, p[0], p[1], p[2], p[3], o);
  };
  const Tensor A = reshape(attention(X, W).A, {c.n_head, T, T});  // (H, T, T)

  out << "layer " << layer << " of " << c.n_layer << ", tokens";
  for (int64_t t : tokens) out << " " << t;
  out << "\n";
  const std::vector<HeadScores> scores = head_scores(A, tokens);
  char line[160];
  for (int64_t h = 0; h < c.n_head; ++h) {
    std::snprintf(line, sizeof line,
                  "\nhead %lld: mean weight on the previous token %.3f; on the tokens after the "
                  "current one's earlier occurrences (induction) %.3f\n",
                  static_cast<long long>(h), scores[h].previous_token, scores[h].induction);
    out << line << heatmap(reshape(narrow(A, 0, h, 1), {T, T}));
  }
  if (!args.check) return 0;
  CheckerOptions names;
  names.parameter_names = {"W_Q", "W_K", "W_V", "W_O"};
  // Four (C, C) weights: the full Jacobian would take a finite difference per entry; random
  // projections v^T J u check the same gradients in a few passes.
  names.gradcheck.fast_mode = true;
  GradModeGuard on(true);  // the checker differentiates
  const InvariantReport report = check_attention(attention, X.detach(), W, names);
  out << "\nthe attention-invariant checker on this layer:\n" << report.str();
  return report.passed() ? 0 : 1;
}

}  // namespace tg
