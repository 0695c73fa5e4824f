// The README's "Models from layers" examples (a CNN, an LSTM, a Llama block), run here; the
// README must show each verbatim (the code between a test's README markers, unindented by 2).
// Each example's results are checked: shapes, PyTorch's parameter names, a gradient in every
// parameter, a loss that falls under a few steps of AdamW.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <tapegrad/tapegrad.h>

namespace tg {
namespace {

// The code between the markers `// README <name>` and `// README end` of this file.
std::string readme_example(const std::string& name) {
  std::ifstream in(TAPEGRAD_README_LAYERS_TEST_CPP);
  std::string code, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (inside && line == "  // README end") break;
    if (inside) code += (line.size() >= 2 ? line.substr(2) : line) + "\n";
    if (line == "  // README " + name) inside = true;
  }
  return code;
}

void expect_in_readme(const std::string& name) {
  const std::string code = readme_example(name);
  ASSERT_GT(code.size(), 200u) << name;
  std::ifstream readme(TAPEGRAD_README_MD);
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find(code), std::string::npos)
      << "README.md does not show the " << name << " example verbatim:\n" << code;
}

bool every_parameter_has_a_gradient(const nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters())
    if (!p.grad().defined() || sum_of_squares(p.grad()).item() == 0) return false;
  return true;
}

TEST(ReadmeLayers, Cnn) {
  // README cnn
  using namespace tg;
  Rng rng(0);
  nn::Sequential net;  // torch.nn.Sequential: parameters 0.weight, 0.bias, 4.weight, ...
  net.append(std::make_unique<nn::Conv2d>(1, 8, 3, rng));  // (N, 1, 28, 28) -> (N, 8, 26, 26)
  net.append(std::make_unique<nn::ReLU>());
  net.append(std::make_unique<nn::MaxPool2d>(2));          // -> (N, 8, 13, 13)
  net.append(std::make_unique<nn::Flatten>());             // -> (N, 1352)
  net.append(std::make_unique<nn::Linear>(8 * 13 * 13, 10, true, rng));
  Tensor images = randn({4, 1, 28, 28}, rng);
  Tensor labels = from_indices({3, 1, 4, 1}, {4});
  optim::AdamW opt(net.named_parameters());
  for (int step = 0; step < 5; ++step) {
    Tensor loss = cross_entropy(net(images), labels);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  // README end
  EXPECT_EQ(net(images).shape(), Shape({4, 10}));
  std::vector<std::string> names;
  for (const auto& [name, p] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "4.weight", "4.bias"}));
  const Tensor loss = cross_entropy(net(images), labels);
  loss.backward();
  EXPECT_TRUE(every_parameter_has_a_gradient(net));
  Rng fresh(0);
  nn::Sequential untrained;
  untrained.append(std::make_unique<nn::Conv2d>(1, 8, 3, fresh));
  untrained.append(std::make_unique<nn::ReLU>());
  untrained.append(std::make_unique<nn::MaxPool2d>(2));
  untrained.append(std::make_unique<nn::Flatten>());
  untrained.append(std::make_unique<nn::Linear>(8 * 13 * 13, 10, true, fresh));
  EXPECT_LT(loss.item(), cross_entropy(untrained(images), labels).item());  // it learned
  expect_in_readme("cnn");
}

TEST(ReadmeLayers, Lstm) {
  // README lstm
  using namespace tg;
  Rng rng(0);
  nn::LSTM lstm(16, 32, rng, {.num_layers = 2, .batch_first = true});  // torch.nn.LSTM's gates
  nn::Linear head(32, 16, true, rng);
  Tensor x = randn({4, 20, 16}, rng);                    // (B, T, input)
  nn::LSTMOutput out = lstm(x);                          // output (B, T, 32), h_n and c_n (2, B, 32)
  Tensor y = head(out.output);                           // (B, T, 16)
  Tensor loss = mse_loss(narrow(y, 1, 0, 19), narrow(x, 1, 1, 19));  // predict the next step
  loss.backward();                                       // through all 20 steps
  Tensor g = lstm.layers[0].weight_hh.grad();            // weight_hh_l0's gradient, (128, 32)
  // README end
  EXPECT_EQ(out.output.shape(), Shape({4, 20, 32}));
  EXPECT_EQ(out.state.h.shape(), Shape({2, 4, 32}));
  EXPECT_EQ(out.state.c.shape(), Shape({2, 4, 32}));
  EXPECT_EQ(g.shape(), Shape({128, 32}));
  EXPECT_TRUE(every_parameter_has_a_gradient(lstm));
  EXPECT_EQ(lstm.named_parameters()[1].first, "weight_hh_l0");
  expect_in_readme("lstm");
}

TEST(ReadmeLayers, LlamaBlock) {
  // README llama
  using namespace tg;
  Rng rng(0);
  nn::LlamaConfig config{.vocab_size = 100, .hidden_size = 64, .intermediate_size = 172,
                         .num_hidden_layers = 2, .num_attention_heads = 8,
                         .num_key_value_heads = 2,  // grouped-query: 4 query heads per kv head
                         .max_position_embeddings = 32};
  nn::LlamaDecoderLayer block(config, rng);  // self_attn (RoPE), mlp (SwiGLU), two RMSNorms
  Tensor h = randn({2, 16, 64}, rng);        // (B, T, hidden)
  Tensor out = block.forward(h);             // (2, 16, 64)
  nn::Llama model(config, rng);              // Hugging Face's names: model.layers.0.self_attn.q_proj.weight
  Tensor idx = from_indices(std::vector<int64_t>(2 * 16, 7), {2, 16});
  Tensor loss = model.loss(idx, idx);        // mean cross-entropy of the logits (2, 16, 100)
  loss.backward();
  nn::save_pretrained(model, "llama_out");   // config.json + model.safetensors, as transformers'
  auto loaded = nn::from_pretrained("llama_out");
  // README end
  EXPECT_EQ(out.shape(), Shape({2, 16, 64}));
  EXPECT_EQ(model.named_parameters()[1].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(model.model.layers[0].self_attn.k_proj.weight.shape(), Shape({16, 64}));  // 2 heads of 8
  EXPECT_TRUE(every_parameter_has_a_gradient(model));
  EXPECT_EQ(loaded->forward(idx).to_vector(), model.forward(idx).to_vector());
  std::filesystem::remove_all("llama_out");
  expect_in_readme("llama");
}

}  // namespace
}  // namespace tg
