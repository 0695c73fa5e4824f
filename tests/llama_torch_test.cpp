// The Llama against an independent PyTorch Llama written after Hugging Face's modeling_llama.py
// (tests/llama_reference.py): every logit, the loss and every parameter's gradient agree to
// 1e-10 relative in float64, with grouped-query attention, without it, with one key/value head
// and tied embeddings, and with another rope_theta and rms_norm_eps. A negative control: the
// reference with rope_theta changed disagrees. Without python3, numpy and torch the suite skips,
// or fails when the environment variable CI is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/nn/llama.h>
#include "nn_util.h"
#include "ops_torch_util.h"  // max_rel_diff
#include "test_util.h"

namespace tg::nn {
namespace {

namespace fs = std::filesystem;
using test::max_rel_diff;
using test::random_state;
using test::tokens;

// Runs the reference on `model`'s weights for idx/targets (2, 5) into dir/out; theta is what the
// reference is told (the model's own unless a test lies to it).
void run_reference(const Llama& model, const fs::path& dir, double theta) {
  fs::create_directories(dir / "in");
  for (const auto& [name, p] : model.named_parameters())
    write_npy(dir / "in" / (name + ".npy"), p);
  const std::vector<double> idx = {0, 6, 2, 3, 1, 5, 5, 4, 0, 2};
  const std::vector<double> targets = {6, 2, 3, -1, 5, 4, 4, 0, 2, 1};
  write_npy(dir / "in" / "idx.npy", from_vector(idx, {2, 5}));
  write_npy(dir / "in" / "targets.npy", from_vector(targets, {2, 5}));
  const LlamaConfig& c = model.config();
  std::ostringstream command;
  command.precision(17);
  command << test::kPython << " " << TAPEGRAD_LLAMA_REFERENCE_PY << " --in " << (dir / "in")
          << " --out " << (dir / "out") << " --vocab " << c.vocab_size << " --hidden "
          << c.hidden_size << " --intermediate " << c.intermediate_size << " --layers "
          << c.num_hidden_layers << " --heads " << c.num_attention_heads << " --kv-heads "
          << c.num_key_value_heads << " --max-pos " << c.max_position_embeddings << " --eps "
          << c.rms_norm_eps << " --theta " << theta << (c.tie_word_embeddings ? " --tie" : "")
          << " > " << (dir / "log") << " 2>&1";
  ASSERT_EQ(std::system(command.str().c_str()), 0) << command.str() << "\n"
                                                   << test::slurp(dir / "log");
}

TEST(Llama, MatchesAnIndependentPyTorchLlama) {
  TG_REQUIRE_PYTHON("numpy, torch");
  struct Case {
    std::string name;
    LlamaConfig config;
  };
  const LlamaConfig base{.vocab_size = 7, .hidden_size = 16, .intermediate_size = 24,
                         .num_hidden_layers = 2, .num_attention_heads = 4,
                         .num_key_value_heads = 2, .max_position_embeddings = 6,
                         .dtype = Dtype::f64};
  LlamaConfig mha = base, mqa_tied = base, other = base;
  mha.num_key_value_heads = 4;
  mqa_tied.num_key_value_heads = 1;
  mqa_tied.tie_word_embeddings = true;
  other.rope_theta = 50.0;
  other.rms_norm_eps = 1e-2;
  const std::vector<Case> cases = {{"grouped-query (4 heads, 2 kv heads)", base},
                                   {"multi-head (4 kv heads)", mha},
                                   {"one kv head, tied embeddings", mqa_tied},
                                   {"rope_theta 50, rms_norm_eps 1e-2", other}};
  uint64_t seed = 30;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const test::TempDir tmp;
    Rng rng(++seed);
    Llama model(c.config, rng);
    model.load_state_dict(random_state(model, rng));
    run_reference(model, tmp.path(), c.config.rope_theta);

    const Tensor idx = tokens({0, 6, 2, 3, 1, 5, 5, 4, 0, 2}, 2, 5);
    const Tensor targets = tokens({6, 2, 3, -1, 5, 4, 4, 0, 2, 1}, 2, 5);
    const Tensor logits = model.forward(idx);
    const Tensor loss = model.loss(idx, targets);
    loss.backward();
    const fs::path out = tmp.path() / "out";
    EXPECT_LE(max_rel_diff(logits, read_npy(out / "logits.npy")), 1e-10);
    EXPECT_LE(max_rel_diff(loss, read_npy(out / "loss.npy")), 1e-10);
    for (const auto& [name, p] : model.named_parameters()) {
      const fs::path file = out / ("grad." + name + ".npy");
      ASSERT_TRUE(fs::exists(file)) << name;
      EXPECT_LE(max_rel_diff(p.grad(), read_npy(file)), 1e-10) << name;
    }

    // negative control: the reference told another rope_theta disagrees on the logits
    const test::TempDir wrong;
    run_reference(model, wrong.path(), c.config.rope_theta * 2);
    EXPECT_GT(max_rel_diff(logits, read_npy(wrong.path() / "out" / "logits.npy")), 1e-6);
  }
}

}  // namespace
}  // namespace tg::nn
