// `tapegrad inspect` on a Llama (RoPE, grouped key/value heads) as a user runs it (a subprocess
// on a checkpoint `tapegrad train --arch llama` wrote), against an attention written out by hand
// here, and the architectures without attention refused:
//   heads:     a heatmap and a score line for every query head of the layer asked for; the
//              scores equal the ones of a loop-by-loop attention over the model's own weights
//              (which reproduces the layer's self_attn output to 1e-12); the other layer's
//              scores do not match (negative control)
//   --check:   every invariant passes on the layer; the same function without its mask fails
//              the mask, first-row and causality invariants (negative control)
//   --tie:     a tied run stores no lm_head.weight, says tie_word_embeddings in config.json,
//              resumes, and a --tie given again that differs from the checkpoint is refused

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "csv_util.h"
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/llama.h>
#include <tapegrad/ops/ops.h>
#include "tools/arch.h"
#include "tools/checkpoint.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::lines;
using test::Outcome;
using test::slurp;
using test::TempDir;

const std::string kExe = TAPEGRAD_EXE;

Outcome run(const std::vector<std::string>& args) { return test::run(kExe, args); }

constexpr int64_t kHeads = 4, kKvHeads = 2, kT = 12, kVocab = 12;

std::vector<std::string> llama_train(const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"train", "--arch", "llama", "--task", "induction", "--vocab",
                                std::to_string(kVocab), "--block", std::to_string(kT),
                                "--layers", "2", "--heads", std::to_string(kHeads), "--kv-heads",
                                std::to_string(kKvHeads), "--embd", "16", "--batch", "4",
                                "--steps", "3", "--eval-every", "0", "--dtype", "f64",
                                "--threads", "1", "--out", out};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Whether a safetensors file holds a tensor of this name.
bool holds(const std::string& path, const std::string& name) {
  for (const auto& [n, t] : read_safetensors(path).tensors)
    if (n == name) return true;
  return false;
}

// A checkpoint's model, its weights loaded.
std::unique_ptr<Model> load(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  ckpt::ModelFile file = ckpt::read_model(path);
  ckpt::load_weights(*file.model, std::move(file.tensors), path);
  return std::move(file.model);
}

// Three updates leave the weights near their N(0, 0.02^2) start, every head near uniform; q_proj
// and k_proj scaled (differently by layer) make heads that prefer some positions, so that the
// scores tell heads and layers apart.
void sharpen(const std::string& from, const std::string& to) {
  std::unique_ptr<Model> model = load(from);
  for (auto& [name, w] : model->module().named_parameters()) {
    const bool qk = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos;
    if (!qk) continue;
    const double factor = name.find("layers.0.") != std::string::npos ? 40 : 25;
    double* p = w.data<double>();
    for (int64_t i = 0; i < w.numel(); ++i) p[i] *= factor;
  }
  fs::create_directories(to);
  ckpt::write_model(to + "/model.safetensors", *model, std::nullopt, 3);
}

// The tokens inspect shows by default: ceil(T / 3) ids repeated (DESIGN.md's repeated sequence).
std::vector<int64_t> repeated_tokens() {
  std::vector<int64_t> s;
  for (int64_t t = 0; t < kT; ++t) s.push_back(t % ((kT + 2) / 3));
  return s;
}

// Row-major (rows, cols) values of a 2-D tensor.
struct Matrix {
  std::vector<double> v;
  int64_t cols;
  double operator()(int64_t i, int64_t j) const { return v[i * cols + j]; }
};
Matrix matrix(const Tensor& t) { return {t.to_vector(), t.size(-1)}; }

// Layer `layer`'s attention written out loop by loop from the Hugging Face definition: for query
// head h, q = x Wq^T and k = x Wk^T of key/value head h / (H / H_kv), each rotated by RoPE's
// half-split pairs (i, i + d/2) at angle t base^(-2i/d), scores q.k / sqrt(d), causal softmax.
// Returns A[h][i][j] and the layer's output o_proj(A v) (T, C).
struct HandAttention {
  std::vector<std::vector<std::vector<double>>> A;
  std::vector<double> Y;
};
HandAttention hand_attention(const nn::Llama& llama, const std::vector<int64_t>& tokens,
                             int64_t layer) {
  NoGradGuard no_grad;
  const nn::LlamaConfig& c = llama.config();
  const auto T = static_cast<int64_t>(tokens.size());
  Tensor x = llama.model.embed_tokens(from_indices(tokens, {1, T}));
  for (int64_t l = 0; l < layer; ++l) x = llama.model.layers[l].forward(x);
  const nn::LlamaAttention& attn = llama.model.layers[layer].self_attn;
  const Matrix X = matrix(llama.model.layers[layer].input_layernorm(x)),
               Wq = matrix(attn.q_proj.weight), Wk = matrix(attn.k_proj.weight),
               Wv = matrix(attn.v_proj.weight), Wo = matrix(attn.o_proj.weight);
  const int64_t C = c.hidden_size, H = c.num_attention_heads, d = C / H, half = d / 2;
  const int64_t group = H / c.num_key_value_heads;
  // proj(x_t) rows [head d, head d + d), rotated at position t.
  auto head_vector = [&](const Matrix& W, int64_t head, int64_t t, bool rotate) {
    std::vector<double> u(d, 0.0);
    for (int64_t r = 0; r < d; ++r)
      for (int64_t k = 0; k < C; ++k) u[r] += W(head * d + r, k) * X(t, k);
    if (!rotate) return u;
    std::vector<double> out(d);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = t * std::pow(c.rope_theta, -2.0 * i / d);
      out[i] = u[i] * std::cos(angle) - u[i + half] * std::sin(angle);
      out[i + half] = u[i + half] * std::cos(angle) + u[i] * std::sin(angle);
    }
    return out;
  };
  HandAttention r;
  r.A.assign(H, std::vector<std::vector<double>>(T, std::vector<double>(T, 0.0)));
  std::vector<double> heads_out(T * H * d, 0.0);  // (T, H d): A v per head, concatenated
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const std::vector<double> q = head_vector(Wq, h, i, true);
      std::vector<double> s(i + 1);
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j <= i; ++j) {
        const std::vector<double> k = head_vector(Wk, h / group, j, true);
        s[j] = 0;
        for (int64_t e = 0; e < d; ++e) s[j] += q[e] * k[e] / std::sqrt(double(d));
        top = std::max(top, s[j]);
      }
      for (int64_t j = 0; j <= i; ++j) total += std::exp(s[j] - top);
      for (int64_t j = 0; j <= i; ++j) {
        r.A[h][i][j] = std::exp(s[j] - top) / total;
        const std::vector<double> v = head_vector(Wv, h / group, j, false);
        for (int64_t e = 0; e < d; ++e) heads_out[(i * H + h) * d + e] += r.A[h][i][j] * v[e];
      }
    }
  r.Y.assign(T * C, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t o = 0; o < C; ++o)
      for (int64_t k = 0; k < H * d; ++k) r.Y[i * C + o] += Wo(o, k) * heads_out[i * H * d + k];
  return r;
}

// DESIGN's scores of one head: the mean of A[t][t - 1] over t >= 1, and the mean over the
// positions t whose token occurred before of the total weight one past those occurrences.
std::pair<double, double> scores(const std::vector<std::vector<double>>& A,
                                 const std::vector<int64_t>& tokens) {
  const auto T = static_cast<int64_t>(tokens.size());
  double previous = 0, induction = 0;
  int64_t with_earlier = 0;
  for (int64_t t = 1; t < T; ++t) {
    previous += A[t][t - 1];
    double w = 0;
    bool earlier = false;
    for (int64_t j = 0; j < t; ++j)
      if (tokens[j] == tokens[t]) {
        w += A[t][j + 1];
        earlier = true;
      }
    if (earlier) {
      induction += w;
      ++with_earlier;
    }
  }
  return {previous / (T - 1), with_earlier ? induction / with_earlier : 0.0};
}

// The (previous, induction) pair each "head h:" line of inspect's output prints.
std::vector<std::pair<double, double>> printed_scores(const std::string& out) {
  std::vector<std::pair<double, double>> s;
  for (const std::string& l : lines(out)) {
    long long h = 0;
    double previous = 0, induction = 0;
    if (std::sscanf(l.c_str(),
                    "head %lld: mean weight on the previous token %lf; on the tokens after the "
                    "current one's earlier occurrences (induction) %lf",
                    &h, &previous, &induction) == 3) {
      EXPECT_EQ(h, static_cast<long long>(s.size())) << l;
      s.emplace_back(previous, induction);
    }
  }
  return s;
}

// Whether every head's printed scores are within 1e-3 (three decimals printed) of the hand ones.
bool scores_match(const std::vector<std::pair<double, double>>& printed, const HandAttention& hand,
                  const std::vector<int64_t>& tokens) {
  if (printed.size() != hand.A.size()) return false;
  for (std::size_t h = 0; h < printed.size(); ++h) {
    const auto [previous, induction] = scores(hand.A[h], tokens);
    if (std::fabs(printed[h].first - previous) > 1e-3 ||
        std::fabs(printed[h].second - induction) > 1e-3)
      return false;
  }
  return true;
}

TEST(InspectCli, LlamaHeadsShowTheScoresOfAHandWrittenAttention) {
  TempDir dir;
  const Outcome trained = run(llama_train(dir / "trained"));
  ASSERT_EQ(trained.status, 0) << trained.err;
  sharpen(dir / "trained", dir / "sharp");
  const std::unique_ptr<Model> model = load(dir / "sharp");
  const auto& llama = dynamic_cast<const nn::Llama&>(model->module());
  const std::vector<int64_t> tokens = repeated_tokens();

  const Outcome r = run({"inspect", "--ckpt", dir / "sharp", "--layer", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("layer 1 of 2, tokens 0 1 2 3 0 1 2 3 0 1 2 3"), std::string::npos) << r.out;
  const std::vector<std::pair<double, double>> printed = printed_scores(r.out);
  ASSERT_EQ(printed.size(), static_cast<std::size_t>(kHeads)) << r.out;
  EXPECT_EQ(r.out.find("checker"), std::string::npos) << r.out;  // only with --check

  // The hand-written attention is the layer's: its output is the model's self_attn on the
  // layer's input.
  const HandAttention layer1 = hand_attention(llama, tokens, 1), layer0 = hand_attention(llama, tokens, 0);
  {
    NoGradGuard no_grad;
    const auto& block = llama.model.layers[1];
    const Tensor x = llama.model.layers[0].forward(llama.model.embed_tokens(from_indices(tokens, {1, kT})));
    const std::vector<double> y = block.self_attn.forward(block.input_layernorm(x)).to_vector();
    ASSERT_EQ(y.size(), layer1.Y.size());
    double worst = 0;
    for (std::size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - layer1.Y[i]));
    EXPECT_LT(worst, 1e-12);
  }
  EXPECT_TRUE(scores_match(printed, layer1, tokens)) << r.out;
  // Negative control: layer 0's attention on the same tokens gives other scores.
  EXPECT_FALSE(scores_match(printed, layer0, tokens)) << r.out;

  // The default layer is the last one; --tokens picks the sequence, layer 0 too.
  const Outcome last = run({"inspect", "--ckpt", dir / "sharp"});
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_EQ(last.out, r.out);
  const std::vector<int64_t> mine = {5, 1, 5, 1, 7};
  const Outcome first = run({"inspect", "--ckpt", dir / "sharp", "--layer", "0", "--tokens", "5,1,5,1,7"});
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("layer 0 of 2, tokens 5 1 5 1 7\n"), std::string::npos) << first.out;
  EXPECT_TRUE(scores_match(printed_scores(first.out), hand_attention(llama, mine, 0), mine))
      << first.out;
}

TEST(InspectCli, LlamaCheckPassesAndAnUnmaskedVariantFails) {
  TempDir dir;
  ASSERT_EQ(run(llama_train(dir / "trained")).status, 0);
  sharpen(dir / "trained", dir / "sharp");
  for (const char* folder : {"trained", "sharp"}) {
    SCOPED_TRACE(folder);
    const Outcome r = run({"inspect", "--ckpt", dir / folder, "--layer", "0", "--check"});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    for (const char* invariant : {"PASS  shapes", "PASS  rows of A sum to 1",
                                  "PASS  weights above the diagonal are 0", "PASS  Y[0] == V[0] W_O",
                                  "PASS  causality through autodiff", "PASS  gradcheck of dY/dX",
                                  "PASS  gradcheck of dY/dW_Q", "PASS  gradcheck of dY/dW_K",
                                  "PASS  gradcheck of dY/dW_V", "PASS  gradcheck of dY/dW_O"})
      EXPECT_NE(r.out.find(invariant), std::string::npos) << invariant << "\n" << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  }

  // The checker on the Llama's attention in-process, and on the same attention with its mask
  // left out (softmax of the raw scores): that one must fail the mask, the first row (position 0
  // now sees every value) and causality, and pass the rest.
  const std::unique_ptr<Model> model = load(dir / "sharp");
  const auto& llama = dynamic_cast<const nn::Llama&>(model->module());
  const nn::LlamaConfig c = llama.config();
  const std::vector<int64_t> tokens = repeated_tokens();
  NoGradGuard no_grad;
  const Tensor X = llama.attention_input(from_indices(tokens, {1, kT}), 1).detach();
  std::vector<Tensor> W;
  for (const Tensor& w : llama.attention_weights(1)) W.push_back(w.detach().clone());
  const AttentionFn masked = [c](const Tensor& x, const std::vector<Tensor>& p) {
    return nn::llama_attention(x, p, c);
  };
  const AttentionFn unmasked = [c](const Tensor& x, const std::vector<Tensor>& p) {
    AttentionOutput o = nn::llama_attention(x, p, c);
    o.A = softmax(o.S);                                      // (B, H, T, T), every key seen
    o.Y = matmul(merge_heads(matmul(o.A, o.V)), o.W_O);      // (B, T, C)
    return o;
  };
  CheckerOptions options;
  options.check_gradients = false;  // the subprocess above checked the gradients
  GradModeGuard on(true);
  EXPECT_TRUE(check_attention(masked, X, W, options).passed())
      << check_attention(masked, X, W, options).str();
  const InvariantReport bad = check_attention(unmasked, X, W, options);
  EXPECT_FALSE(bad.passed());
  for (const InvariantResult& result : bad.results) {
    const bool should_fail = result.name == "weights above the diagonal are 0" ||
                             result.name == "Y[0] == V[0] W_O" ||
                             result.name.starts_with("causality");
    EXPECT_EQ(result.passed, !should_fail) << result.name << ": " << result.detail;
  }
}

// Architectures without attention: one line naming the file and why, status 1, nothing printed.
TEST(InspectCli, ModelsWithoutAttentionAreRefused) {
  TempDir dir;
  for (const char* arch : {"mlp", "cnn"}) {
    SCOPED_TRACE(arch);
    TrainArgs flags;
    flags.arch = arch;
    Rng rng(0);
    const std::unique_ptr<Model> model = find_arch(arch)->build(config_json_of(*find_arch(arch), flags), rng);
    fs::create_directories(dir / arch);
    const std::string path = (dir / arch / "model.safetensors").string();
    ckpt::write_model(path, *model, std::nullopt, 0);
    const Outcome r = run({"inspect", "--ckpt", dir / arch});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(path + ": a " + arch + " model has no attention"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(TrainCliTie, TiedLlamaStoresOneMatrixAndResumes) {
  TempDir dir;
  const Outcome tied = run(llama_train(dir / "tied", {"--tie"}));
  ASSERT_EQ(tied.status, 0) << tied.err;
  EXPECT_FALSE(holds(dir / "tied/model.safetensors", "lm_head.weight"));
  EXPECT_TRUE(holds(dir / "tied/model.safetensors", "model.embed_tokens.weight"));
  const nlohmann::json config = nlohmann::json::parse(slurp(dir / "tied/config.json"));
  EXPECT_EQ(config.at("tie_word_embeddings"), true);
  // Negative control: the same run untied stores lm_head.weight and says false.
  ASSERT_EQ(run(llama_train(dir / "untied")).status, 0);
  EXPECT_TRUE(holds(dir / "untied/model.safetensors", "lm_head.weight"));
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "untied/config.json")).at("tie_word_embeddings"), false);

  // --resume reads the tie back from the checkpoint (no --tie given again), and takes it given
  // again when it agrees.
  const Outcome resumed = run(llama_train(dir / "tied", {"--steps", "5", "--resume", dir / "tied"}));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(lines(slurp(dir / "tied/metrics.csv")).size(), 6u);
  EXPECT_FALSE(holds(dir / "tied/model.safetensors", "lm_head.weight"));
  const Outcome again = run(llama_train(dir / "tied", {"--steps", "6", "--tie", "--resume", dir / "tied"}));
  EXPECT_EQ(again.status, 0) << again.err;
  // --tie on a run started untied differs from its checkpoint: a usage error, the folder kept.
  const std::string before = slurp(dir / "untied/model.safetensors");
  const Outcome differs = run(llama_train(dir / "untied", {"--steps", "5", "--tie", "--resume", dir / "untied"}));
  EXPECT_EQ(differs.status, 2) << differs.err;
  EXPECT_NE(differs.err.find("--tie on differs from the checkpoint's off"), std::string::npos) << differs.err;
  EXPECT_EQ(lines(differs.err).size(), 1u) << differs.err;
  EXPECT_TRUE(slurp(dir / "untied/model.safetensors") == before);
}

}  // namespace
}  // namespace tg
