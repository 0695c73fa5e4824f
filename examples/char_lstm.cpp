// Train a character-level LSTM language model on a text, in C++: each character's embedding, an
// LSTM over windows of 64 characters, a linear head to the next character's logits, cross
// entropy, AdamW; then continue the text's first characters, each next character drawn from the
// model's distribution with a seeded Rng, carrying the LSTM's state from one to the next.
//
//   char_lstm TEXT_FILE [STEPS]

#include <algorithm>
#include <cstddef>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <tapegrad/tapegrad.h>

#include "args.h"

// As a torch.nn.Module: embed, lstm, head (parameters embed.weight, lstm.weight_ih_l0, ...).
struct CharLSTM : tg::nn::Module {
  CharLSTM(int64_t vocab, int64_t hidden, tg::Rng& rng)
      : embed(vocab, 32, rng, tg::Dtype::f32, /*init_std=*/1.0),  // torch.nn.Embedding's N(0, 1)
        lstm(32, hidden, rng, {.batch_first = true}),
        head(hidden, vocab, true, rng) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  // idx (B, T) -> logits (B, T, vocab) and the LSTM's state after the last character.
  std::pair<tg::Tensor, tg::nn::LSTMState> forward(const tg::Tensor& idx,
                                                   const tg::nn::LSTMState& state = {}) const {
    const tg::nn::LSTMOutput out = lstm(embed(idx), state);  // (B, T, hidden)
    return {head(out.output), out.state};
  }
  tg::nn::Embedding embed;
  tg::nn::LSTM lstm;
  tg::nn::Linear head;
};

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: char_lstm TEXT_FILE [STEPS]\n";
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  if (!file) {
    std::cerr << "char_lstm: cannot read " << argv[1] << "\n";
    return 1;
  }
  try {
    const std::string text{std::istreambuf_iterator<char>(file), {}};  // throws for a directory
    const int64_t steps = argc > 2 ? count_arg(argv[2], "STEPS", 1) : 500;
    const tg::data::CharTokenizer tokenizer = tg::data::CharTokenizer::from_text(text);
    const tg::data::TextData data(text, tokenizer);  // 90% train, 10% validation
    tg::Rng rng(0);
    CharLSTM model(tokenizer.size(), 128, rng);
    tg::optim::AdamW opt(model.named_parameters(), {.lr = 3e-3});

    for (int64_t it = 0; it < steps; ++it) {
      const tg::data::Batch batch = data.sample(tg::data::Split::train, 16, 64, rng);  // (16, 64)
      const tg::Tensor loss = tg::cross_entropy(model.forward(batch.x).first, batch.y);
      loss.backward();
      tg::optim::clip_grad_norm(model.named_parameters(), 1.0);
      opt.step();
      opt.zero_grad();
      if (it % 50 == 0 || it == steps - 1)
        std::cout << "step " << it << " loss " << loss.item() << "\n";
    }

    tg::NoGradGuard no_grad;
    std::vector<int64_t> ids = tokenizer.encode(text);
    ids.resize(std::min<std::size_t>(ids.size(), 8));  // the prompt: the first 8 characters
    const int64_t T = static_cast<int64_t>(ids.size());
    auto [logits, state] = model.forward(tg::from_indices(ids, {1, T}));  // logits (1, T, vocab)
    for (int k = 0; k < 300; ++k) {
      const tg::Tensor last = tg::narrow(logits, 1, logits.size(1) - 1, 1);  // (1, 1, vocab)
      const std::vector<double> p = tg::softmax(last).to_vector();  // the next one's probabilities
      double u = rng.uniform(0, 1);
      int64_t next = 0;  // drawn from p: the first character whose cumulative probability passes u
      while (next + 1 < tokenizer.size() && (u -= p[next]) > 0) ++next;
      ids.push_back(next);
      std::tie(logits, state) = model.forward(tg::from_indices({next}, {1, 1}), state);
    }
    std::cout << "sample: " << tokenizer.decode(ids) << "\n";
  } catch (const std::exception& e) {  // tg's errors (tg::Error) and the file's
    std::cerr << "char_lstm: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
