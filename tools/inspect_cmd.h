#pragma once
// `tapegrad inspect`: looks inside a trained GPT's (no biases, as the lesson's layer) or Llama's
// attention (the checkpoint's model an nn::GPT or nn::Llama, whose attention_weights give the
// lesson's weights; other architectures have no attention and are refused):
// the weights of every head of one layer on a token sequence, as heatmaps, with how much each
// head attends to the previous token and to the token after the current one's last occurrence
// (an induction head's stripe), and the attention-invariant checker run on that layer.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

struct InspectArgs {
  std::string ckpt;             // folder with model.safetensors
  int64_t layer = -1;           // -1: the last layer
  std::vector<int64_t> tokens;  // empty: a repeated sequence (see repeated_sequence)
  bool check = false;           // also run the invariant checker (gradients in fast mode)
};

/// What one head does on a sequence: its mean weight on the previous position, and its mean
/// total weight on the positions right after the current token's earlier occurrences (over the
/// positions that have one): near 1 for an induction head.
struct HeadScores {
  double previous_token = 0;
  double induction = 0;
};

/// Block_size tokens: P distinct ids 0, 1, ..., P - 1 with P = ceil(T / 3), repeated.
std::vector<int64_t> repeated_sequence(int64_t T, int64_t vocab_size);

/// The weights (H, T, T) of `layer` on `tokens` (B = 1) and each head's scores. Throws
/// ValueError (a model with biases, a bad layer or token), ShapeError.
std::vector<HeadScores> head_scores(const Tensor& A, const std::vector<int64_t>& tokens);

/// `tapegrad inspect`: prints heatmaps and scores (and the checker's report with args.check) to
/// `out`. Returns 0, or 1 when the checker fails. Throws IoError (checkpoint), ValueError.
int run_inspect(const InspectArgs& args, std::ostream& out);

}  // namespace tg
