// Train a small GPT on a text, in C++, the way nanoGPT's train.py does it: char-level tokens,
// AdamW with nanoGPT's two parameter groups, warmup + cosine learning rate, gradient clipping;
// then save it as safetensors, load it back, and sample a few characters.
//
//   train_gpt TEXT_FILE [STEPS] [OUT.safetensors]

#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <tapegrad/tapegrad.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: train_gpt TEXT_FILE [STEPS] [OUT.safetensors]\n";
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  if (!file) {
    std::cerr << "train_gpt: cannot read " << argv[1] << "\n";
    return 1;
  }
  const std::string text{std::istreambuf_iterator<char>(file), {}};
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 200;
  const std::string out = argc > 3 ? argv[3] : "model.safetensors";

  try {
    const tg::data::CharTokenizer tokenizer = tg::data::CharTokenizer::from_text(text);
    const tg::data::TextData data(text, tokenizer);

    tg::nn::GPTConfig config;  // nanoGPT's names
    config.dtype = tg::Dtype::f32;
    config.vocab_size = tokenizer.size();
    config.block_size = 32;
    config.n_layer = 2;
    config.n_head = 2;
    config.n_embd = 32;
    tg::Rng rng(0);
    tg::nn::GPT model(config, rng);

    tg::optim::AdamW opt(model.named_parameters(), {.lr = 3e-3, .weight_decay = 0.1});
    const tg::optim::LrSchedule schedule{.lr = 3e-3, .lr_min = 3e-4, .warmup = 10, .steps = steps};
    for (int64_t it = 0; it < steps; ++it) {
      opt.set_lr(schedule(it));
      const tg::data::Batch batch = data.sample(tg::data::Split::train, 8, config.block_size, rng);
      const tg::Tensor loss = model.loss(batch.x, batch.y);  // forward + cross-entropy
      loss.backward();
      tg::optim::clip_grad_norm(model.named_parameters(), 1.0);
      opt.step();
      opt.zero_grad();
      if (it % 50 == 0 || it == steps - 1) std::cout << "step " << it << " loss " << loss.item() << "\n";
    }

    tg::write_safetensors(out, model.state_dict(), {{"tapegrad.vocab", tokenizer.vocab()}});
    tg::Rng other(1);
    tg::nn::GPT loaded(config, other);
    loaded.load_state_dict(tg::read_safetensors(out).tensors);
    loaded.eval();

    // Sampling: each new token reuses the keys and values of the ones before (a KV cache).
    tg::nn::KVCache cache;
    std::vector<int64_t> ids = tokenizer.encode(text.substr(0, 1));
    tg::Tensor logits = loaded.forward_cached(tg::from_indices(ids, {1, 1}), cache);  // (1, 1, V)
    for (int k = 0; k < 30 && cache.length() < config.block_size; ++k) {
      const tg::Tensor p = tg::softmax(logits);  // the last position's distribution
      double u = rng.uniform(0, 1), acc = 0;
      int64_t next = 0;
      for (; next + 1 < config.vocab_size; ++next)
        if ((acc += p.at({0, logits.size(1) - 1, next})) > u) break;
      ids.push_back(next);
      logits = loaded.forward_cached(tg::from_indices({next}, {1, 1}), cache);
    }
    std::cout << "sample: " << tokenizer.decode(ids) << "\n";
  } catch (const tg::Error& e) {
    std::cerr << "train_gpt: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
