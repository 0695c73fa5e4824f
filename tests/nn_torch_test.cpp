// The GPT against a PyTorch model of its own (tests/gpt_reference.py): every logit, the loss and
// every parameter's gradient agree to 1e-10 relative in float64, with and without biases, with
// the erf GELU, and attention only. Without python3, numpy and torch the suite skips, or fails
// when the environment variable CI is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/nn/gpt.h>
#include "nn_util.h"
#include "ops_torch_util.h"  // max_rel_diff
#include "test_util.h"

namespace tg::nn {
namespace {

namespace fs = std::filesystem;
using test::max_rel_diff;
using test::random_state;
using test::tiny;
using test::tokens;

TEST(GPT, MatchesThePyTorchReference) {
  TG_REQUIRE_PYTHON("numpy, torch");
  struct Case {
    std::string name, flags;
    GPTConfig config;
  };
  GPTConfig big = tiny();
  big.vocab_size = 7;
  big.block_size = 6;
  big.n_embd = 8;
  GPTConfig erf = big;
  erf.bias = false;
  erf.gelu = GeluKind::erf;
  GPTConfig attention_only = big;
  attention_only.attention_only = true;
  const std::vector<Case> cases = {{"tanh, bias", "", big},
                                   {"erf, no bias", " --no-bias --gelu erf", erf},
                                   {"attention only", " --attention-only", attention_only}};
  uint64_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const test::TempDir tmp;
    const fs::path& dir = tmp.path();
    fs::create_directories(dir / "in");
    Rng rng(++seed);
    GPT model(c.config, rng);
    model.load_state_dict(random_state(model, rng));
    for (const auto& [name, p] : model.named_parameters())
      write_npy(dir / "in" / (name + ".npy"), p);
    // B = 2, T = 5 < block_size; token ids as float64 .npy, converted by the reference.
    const std::vector<int64_t> idx = {0, 6, 2, 3, 1, 5, 5, 4, 0, 2};
    const std::vector<int64_t> targets = {6, 2, 3, -1, 5, 4, 4, 0, 2, 1};
    const auto as_double = [](const std::vector<int64_t>& v) {
      return std::vector<double>(v.begin(), v.end());
    };
    write_npy(dir / "in" / "idx.npy", from_vector(as_double(idx), {2, 5}));
    write_npy(dir / "in" / "targets.npy", from_vector(as_double(targets), {2, 5}));
    const auto& g = c.config;
    const std::string command =
        test::kPython + " " + TAPEGRAD_GPT_REFERENCE_PY + " --in " + (dir / "in").string() +
        " --out " + (dir / "out").string() + " --vocab " + std::to_string(g.vocab_size) +
        " --block " + std::to_string(g.block_size) + " --layers " + std::to_string(g.n_layer) +
        " --heads " + std::to_string(g.n_head) + " --embd " + std::to_string(g.n_embd) + c.flags +
        " > " + (dir / "log").string() + " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;

    const Tensor logits = model.forward(tokens(idx, 2, 5));
    const Tensor loss = model.loss(tokens(idx, 2, 5), tokens(targets, 2, 5));
    loss.backward();
    EXPECT_LE(max_rel_diff(logits, read_npy(dir / "out" / "logits.npy")), 1e-10);
    EXPECT_LE(max_rel_diff(loss, read_npy(dir / "out" / "loss.npy")), 1e-10);
    for (const auto& [name, p] : model.named_parameters()) {
      const fs::path file = dir / "out" / ("grad." + name + ".npy");
      ASSERT_TRUE(fs::exists(file)) << name;
      EXPECT_LE(max_rel_diff(p.grad(), read_npy(file)), 1e-10) << name;
    }
  }
}

}  // namespace
}  // namespace tg::nn
