// `tapegrad sample`: text from a trained char-level model, as nanoGPT's sample.py.
//
//   context = encode(prompt)   (the vocabulary's first character when the prompt is empty:
//                               nanoGPT starts Shakespeare from "\n", which sorts first there)
//   repeat N times: logits of the last position -> / temperature -> top-k -> softmax -> draw
//
// The model's Decoder keeps each layer's keys and values (GPT::forward_cached), so a new token
// costs one position's forward against the cache, O(T), not a forward over the whole context.
// Past block_size the context is cropped to its last block_size tokens as nanoGPT does, and the
// cache is recomputed for that window (it no longer matches a prefix of the positions).

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <vector>

#include <tapegrad/data/tokenizer.h>
#include "tools/checkpoint.h"
#include "tools/sample_cmd.h"

namespace tg {

namespace {

// A uniform double in [0, 1) from the engine's 53 high bits: the same on every platform, unlike
// std::uniform_real_distribution, whose algorithm each standard library chooses.
double uniform01(Rng& rng) { return static_cast<double>(rng.engine()() >> 11) * 0x1.0p-53; }

}  // namespace

int64_t sample_token(const Tensor& logits_row, double temperature, int64_t top_k, Rng& rng) {
  const std::vector<double> logits = logits_row.to_vector();
  const auto V = static_cast<int64_t>(logits.size());
  for (int64_t i = 0; i < V; ++i)
    if (!std::isfinite(logits[i]))
      throw ValueError("sample: the model's logit for token " + std::to_string(i) + " is " +
                       std::to_string(logits[i]) + " (a diverged model?)");
  if (temperature == 0)  // greedy: the first maximum, as torch.argmax
    return std::max_element(logits.begin(), logits.end()) - logits.begin();
  std::vector<double> z(logits.size());
  for (int64_t i = 0; i < V; ++i) z[i] = logits[i] / temperature;
  double cut = -std::numeric_limits<double>::infinity();
  if (top_k > 0 && top_k < V) {  // nanoGPT: logits below the k-th largest become -inf
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                     std::greater<double>());
    cut = sorted[top_k - 1];
  }
  const double top = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double total = 0;
  for (int64_t i = 0; i < V; ++i) total += p[i] = z[i] < cut ? 0 : std::exp(z[i] - top);
  const double u = uniform01(rng) * total;
  double acc = 0;
  int64_t last = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (p[i] == 0) continue;
    last = i;
    acc += p[i];
    if (u < acc) return i;
  }
  return last;  // u rounded up to the total
}

std::vector<int64_t> generate(Decoder& decoder, std::vector<int64_t> context, int64_t n,
                              double temperature, int64_t top_k, Rng& rng) {
  if (context.empty()) throw ValueError("generate: the context is empty");
  const int64_t block = decoder.max_context();
  decoder.clear();
  std::vector<int64_t> pending = context;  // tokens not yet in the cache
  if (static_cast<int64_t>(pending.size()) > block)
    pending.erase(pending.begin(), pending.end() - block);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor logits = decoder.forward(pending);  // (1, T, V)
    const int64_t V = logits.size(-1);
    const std::vector<double> all = logits.to_vector();
    const Tensor last = from_vector(std::vector<double>(all.end() - V, all.end()), {V}, Dtype::f64);
    const int64_t next = sample_token(last, temperature, top_k, rng);
    out.push_back(next);
    context.push_back(next);
    if (decoder.cached() < block) {
      pending = {next};
    } else {  // the window is full: crop to the last block_size tokens, recompute the cache
      decoder.clear();
      pending.assign(context.end() - block, context.end());
    }
  }
  return out;
}

void run_sample(const SampleArgs& args, std::ostream& out) {
  if (args.tokens < 0) throw ValueError("--tokens must be >= 0, got " + std::to_string(args.tokens));
  if (!(args.temperature >= 0) || !std::isfinite(args.temperature))
    throw ValueError("--temperature must be a number >= 0, got " + std::to_string(args.temperature));
  if (args.top_k < 0) throw ValueError("--top-k must be >= 1, got " + std::to_string(args.top_k));
  const std::string path = (std::filesystem::path(args.ckpt) / "model.safetensors").string();
  ckpt::ModelFile file = ckpt::read_model(path);
  if (!file.vocab)
    throw ValueError(path + ": the model has no vocabulary (tapegrad.vocab): it was trained on "
                     "token ids (--task or --batches), not on --text, so there is no text to print");
  const data::CharTokenizer tok = data::CharTokenizer::from_vocab(*file.vocab);
  std::vector<int64_t> context;
  try {
    context = tok.encode(args.prompt);
  } catch (const ValueError& e) {
    throw ValueError("--prompt: " + std::string(e.what()) + " of " + path);
  }
  if (context.empty()) context = {0};  // the vocabulary's first character (see the top)
  ckpt::load_weights(*file.model, std::move(file.tensors), path);
  file.model->module().eval();
  const std::unique_ptr<Decoder> decoder = file.model->decoder();
  if (!decoder)
    throw ValueError(path + ": a " + file.model->arch().name + " model does not generate text");
  Rng rng(args.seed);
  const std::vector<int64_t> ids =
      generate(*decoder, context, args.tokens, args.temperature, args.top_k, rng);
  out << (args.prompt.empty() ? tok.decode({0}) : args.prompt) << tok.decode(ids) << std::flush;
}

}  // namespace tg
