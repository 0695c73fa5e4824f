// The attention models, their layer class and the RoPE op on bad inputs: a table of 22 rows,
// each the error type and the fragments its message must hold (the model and the shapes).

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::AttentionOptions;
using tg::Tensor;

enum class Err { Shape, Value };

struct BadCase {
  const char* name;
  std::function<void()> call;
  Err err;
  std::vector<std::string> fragments;
};

TEST(Attention, BadInputsThrowNamingModelAndShapes) {
  const Tensor X = tg::zeros({5, 4}), W = tg::zeros({4, 4}), none;
  const auto z = [](int64_t r, int64_t c) { return tg::zeros({r, c}); };
  const auto one = [](Tensor X, Tensor Q, Tensor K, Tensor V, Tensor O, AttentionOptions o) {
    tg::single_head_attention(X, Q, K, V, O, o);
  };
  const auto mul = [](Tensor X, Tensor Q, Tensor K, Tensor V, Tensor O, AttentionOptions o) {
    tg::multi_head_attention(X, Q, K, V, O, o);
  };
  const std::string sh = "single_head_attention", mh = "multi_head_attention";
  const auto S = Err::Shape, V = Err::Value;
  tg::Rng rng(1);
  const std::vector<BadCase> table = {
      {"X rank 1", [&] { one(tg::zeros({4}), W, W, W, none, {}); }, S,
       {sh, "X (4,)", "W_Q (4, 4)"}},
      {"X rank 4", [&] { mul(tg::zeros({1, 2, 5, 4}), W, W, W, W, {.heads = 2}); }, S,
       {mh, "X (1, 2, 5, 4)", "W_O (4, 4)"}},
      {"W_Q rows != D", [&] { one(X, z(3, 4), z(3, 4), W, none, {}); }, S,
       {sh, "X (5, 4)", "W_Q (3, 4)"}},
      {"W_V rows != D", [&] { mul(X, W, W, z(5, 4), W, {.heads = 2}); }, S, {mh, "W_V (5, 4)"}},
      {"W_Q, W_K differ", [&] { one(X, W, z(4, 2), W, none, {}); }, S,
       {sh, "W_Q (4, 4)", "W_K (4, 2)"}},
      {"W_O not (d_v, d_v)", [&] { one(X, W, W, z(4, 2), W, {}); }, S,
       {sh, "W_V (4, 2)", "W_O (4, 4)"}},
      {"W_O rank 1", [&] { mul(X, W, W, W, tg::zeros({4}), {.heads = 2}); }, S, {mh, "W_O (4,)"}},
      {"H does not divide d_k", [&] { mul(X, z(4, 6), z(4, 6), W, W, {.heads = 4}); }, S,
       {mh, "W_Q (4, 6)", "4 heads"}},
      {"H does not divide d_v", [&] { mul(X, W, W, z(4, 6), none, {.heads = 4}); }, S,
       {mh, "W_V (4, 6)", "4 heads"}},
      {"odd d_k, RoPE", [&] { one(X, z(4, 3), z(4, 3), W, none, {.rope = true}); }, S,
       {sh, "W_Q (4, 3)", "even"}},
      {"odd d_h, RoPE", [&] { mul(X, z(4, 6), z(4, 6), W, W, {.heads = 2, .rope = true}); }, S,
       {mh, "W_Q (4, 6)", "even"}},
      {"W_V undefined", [&] { one(X, W, W, none, none, {}); }, V, {sh, "W_V"}},
      {"window < 0", [&] { one(X, W, W, W, none, {.window = -1}); }, V, {sh, "window", "-1"}},
      {"heads < 1", [&] { mul(X, W, W, W, W, {.heads = 0}); }, V, {mh, "heads", "0"}},
      {"rope base 0", [&] { one(X, W, W, W, none, {.rope = true, .rope_base = 0.0}); }, V,
       {sh, "rope base"}},
      {"rope base < 0", [&] { mul(X, W, W, W, W, {.heads = 2, .rope = true, .rope_base = -5.0}); },
       V, {mh, "rope base", "-5"}},
      {"rope base NaN", [&] { one(X, W, W, W, none, {.rope = true, .rope_base = NAN}); }, V,
       {sh, "rope base"}},
      {"layer: H does not divide", [&] { tg::nn::QKVAttention(4, 6, 4, {.heads = 4}, 1, rng); },
       V, {"QKVAttention", "4 heads", "d_k = 6"}},
      {"layer: window < 0", [&] { tg::nn::QKVAttention(4, 4, 4, {.window = -2}, 0, rng); }, V,
       {"QKVAttention", "window"}},
      {"rope op: odd d_h", [] { tg::rope(tg::zeros({3, 5})); }, S, {"rope", "(3, 5)"}},
      {"rope op: rank 1", [] { tg::rope(tg::zeros({4})); }, S, {"rope", "(4,)"}},
      {"rope op: base 0", [] { tg::rope(tg::zeros({3, 4}), 0.0); }, V, {"rope", "base"}},
  };
  for (const BadCase& b : table) {
    SCOPED_TRACE(b.name);
    if (b.err == Err::Shape)
      tg::test::expect_throws<tg::ShapeError>(b.call, b.fragments);
    else
      tg::test::expect_throws<tg::ValueError>(b.call, b.fragments);
  }
}

}  // namespace
