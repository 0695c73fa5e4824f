// `tapegrad inspect`: a trained layer's attention in the lesson's terms, so the same heatmaps and
// the same invariant checker as the demo apply to a model that learned: a GPT's through
// multi_head_attention (nn::GPT::attention_weights gives its W_Q, W_K, W_V, W_O), a Llama's
// through nn::llama_attention (RoPE, grouped key/value heads; nn::Llama::attention_weights).

#include "tools/inspect_cmd.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/llama.h>
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

// One layer's attention as inspect shows and checks it: its input on the tokens, its weights
// (leaves of their own) and the attention function of both, in the lesson's terms.
struct InspectedLayer {
  int64_t layer = 0, layers = 0, heads = 0;
  std::vector<int64_t> tokens;
  Tensor X;               // (1, T, C)
  std::vector<Tensor> W;  // W_Q, W_K, W_V, W_O
  AttentionFn attention;
};

int64_t layer_of(const InspectArgs& args, int64_t layers) {
  return args.layer < 0 ? layers - 1 : args.layer;
}

std::vector<int64_t> tokens_of(const InspectArgs& args, int64_t block, int64_t vocab) {
  return args.tokens.empty() ? repeated_sequence(block, vocab) : args.tokens;
}

std::vector<Tensor> leaves(const std::vector<Tensor>& weights) {
  std::vector<Tensor> W;
  for (const Tensor& w : weights) W.push_back(w.detach().clone());
  return W;
}

// A GPT's block through the lesson's multi_head_attention (GPT::attention_weights).
InspectedLayer gpt_layer(const nn::GPT& model, const InspectArgs& args) {
  const nn::GPTConfig& c = model.config();
  InspectedLayer l{layer_of(args, c.n_layer), c.n_layer, c.n_head,
                   tokens_of(args, c.block_size, c.vocab_size), {}, {}, {}};
  const auto T = static_cast<int64_t>(l.tokens.size());
  l.X = model.attention_input(from_indices(l.tokens, {1, T}), l.layer).detach();  // (1, T, C)
  l.W = leaves(model.attention_weights(l.layer));
  AttentionOptions o;
  o.heads = c.n_head;
  o.need_weights = true;
  l.attention = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return multi_head_attention(x, p[0], p[1], p[2], p[3], o);
  };
  return l;
}

// A Llama's self_attn (RoPE, grouped key/value heads) through nn::llama_attention.
InspectedLayer llama_layer(const nn::Llama& model, const InspectArgs& args) {
  const nn::LlamaConfig& c = model.config();
  InspectedLayer l{layer_of(args, c.num_hidden_layers), c.num_hidden_layers,
                   c.num_attention_heads,
                   tokens_of(args, c.max_position_embeddings, c.vocab_size), {}, {}, {}};
  const auto T = static_cast<int64_t>(l.tokens.size());
  l.X = model.attention_input(from_indices(l.tokens, {1, T}), l.layer).detach();  // (1, T, C)
  l.W = leaves(model.attention_weights(l.layer));
  l.attention = [c](const Tensor& x, const std::vector<Tensor>& p) {
    return nn::llama_attention(x, p, c);
  };
  return l;
}

InspectedLayer inspected(const Model& model, const InspectArgs& args, const std::string& path) {
  if (const auto* gpt = dynamic_cast<const nn::GPT*>(&model.module())) return gpt_layer(*gpt, args);
  if (const auto* llama = dynamic_cast<const nn::Llama*>(&model.module()))
    return llama_layer(*llama, args);
  throw ValueError(path + ": a " + model.arch().name +
                   " model has no attention; inspect shows a gpt's or a llama's");
}

}  // namespace

int run_inspect(const InspectArgs& args, std::ostream& out) {
  const std::string path = (std::filesystem::path(args.ckpt) / "model.safetensors").string();
  ckpt::ModelFile file = ckpt::read_model(path);
  ckpt::load_weights(*file.model, std::move(file.tensors), path);
  file.model->module().eval();
  NoGradGuard no_grad;
  const InspectedLayer l = inspected(*file.model, args, path);
  const auto T = static_cast<int64_t>(l.tokens.size());
  const Tensor A = reshape(l.attention(l.X, l.W).A, {l.heads, T, T});  // (H, T, T)

  out << "layer " << l.layer << " of " << l.layers << ", tokens";
  for (int64_t t : l.tokens) out << " " << t;
  out << "\n";
  const std::vector<HeadScores> scores = head_scores(A, l.tokens);
  char line[160];
  for (int64_t h = 0; h < l.heads; ++h) {
    std::snprintf(line, sizeof line,
                  "\nhead %lld: mean weight on the previous token %.3f; on the tokens after the "
                  "current one's earlier occurrences (induction) %.3f\n",
                  static_cast<long long>(h), scores[h].previous_token, scores[h].induction);
    out << line << heatmap(reshape(narrow(A, 0, h, 1), {T, T}));
  }
  if (!args.check) return 0;
  CheckerOptions names;
  names.parameter_names = {"W_Q", "W_K", "W_V", "W_O"};
  // Four (C, C)-sized weights: the full Jacobian would take a finite difference per entry;
  // random projections v^T J u check the same gradients in a few passes.
  names.gradcheck.fast_mode = true;
  GradModeGuard on(true);  // the checker differentiates
  const InvariantReport report = check_attention(l.attention, l.X, l.W, names);
  out << "\nthe attention-invariant checker on this layer:\n" << report.str();
  return report.passed() ? 0 : 1;
}

}  // namespace tg
