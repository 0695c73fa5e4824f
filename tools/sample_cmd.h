#pragma once
// `tapegrad sample`: main.cpp parses the flags (CLI11) into SampleArgs and calls run_sample; the
// sampler's pieces are public for the tests.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include "tools/arch.h"

namespace tg {

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

/// Generates `n` tokens after `context` (ids, at least one) with the decoder's cache (emptied
/// first); when the sequence passes max_context() the context is cropped to its last
/// max_context() tokens and the cache recomputed for that window, as nanoGPT's generate. Throws
/// ValueError for an empty context, and as Decoder::forward.
std::vector<int64_t> generate(Decoder& decoder, std::vector<int64_t> context, int64_t n,
                              double temperature, int64_t top_k, Rng& rng);

}  // namespace tg
