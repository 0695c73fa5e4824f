// The attention models, their layer class and the RoPE op on bad inputs: a table of 22 rows,
// each the error type and the fragments its message must hold (the model and the shapes). The
// image layers and classifiers likewise: a table of 12 rows.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/nn/attention.h>
#include <tapegrad/nn/conv.h>
#include <tapegrad/nn/flatten.h>
#include <tapegrad/nn/image_classifiers.h>
#include <tapegrad/nn/pool.h>
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

void expect_all(const std::vector<BadCase>& table) {
  for (const BadCase& b : table) {
    SCOPED_TRACE(b.name);
    if (b.err == Err::Shape)
      tg::test::expect_throws<tg::ShapeError>(b.call, b.fragments);
    else
      tg::test::expect_throws<tg::ValueError>(b.call, b.fragments);
  }
}

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
  expect_all(table);
}

TEST(ImageLayers, BadInputsThrowNamingLayerAndShapes) {
  using namespace tg::nn;
  tg::Rng rng(3);
  const Conv2d conv(3, 4, 3, rng);
  const Conv1d conv1(2, 4, 3, rng);
  const MnistNet net({.dtype = tg::Dtype::f64}, rng);
  const Mlp mlp({.hidden = 8, .dtype = tg::Dtype::f64}, rng);
  const auto S = Err::Shape, V = Err::Value;
  expect_all({
      {"Conv2d: 3 channels wanted", [&] { conv(tg::zeros({1, 2, 5, 5})); }, S,
       {"Conv2d(3, 4, (3, 3))", "(1, 2, 5, 5)", "C_in = 3"}},
      {"Conv2d: rank 3", [&] { conv(tg::zeros({3, 5, 5})); }, S, {"Conv2d", "(3, 5, 5)"}},
      {"Conv2d: input smaller than the kernel", [&] { conv(tg::zeros({1, 3, 2, 5})); }, S,
       {"conv2d", "(1, 3, 2, 5)"}},
      {"Conv1d: rank 4", [&] { conv1(tg::zeros({1, 2, 5, 5})); }, S,
       {"Conv1d(2, 4, 3)", "(1, 2, 5, 5)", "(N, C_in, L)"}},
      {"Conv2d: groups not dividing", [&] { Conv2d(3, 4, 3, rng, {.groups = 2}); }, V,
       {"Conv2d(3, 4, (3, 3))", "groups = 2"}},
      {"Conv1d: zero channels", [&] { Conv1d(0, 4, 3, rng); }, V, {"Conv1d(0, 4, 3)", "at least 1"}},
      {"MaxPool2d: rank 2", [] { MaxPool2d(2)(tg::zeros({4, 4})); }, S, {"max_pool2d", "(4, 4)"}},
      {"AvgPool2d: padding over half", [] { AvgPool2d(2, 2, 2)(tg::zeros({1, 1, 4, 4})); }, V,
       {"avg_pool2d", "padding"}},
      {"Flatten: start after end", [] { Flatten(2, 1)(tg::zeros({2, 3, 4})); }, S,
       {"Flatten(2, 1)", "(2, 3, 4)"}},
      {"Flatten: end past the rank", [] { Flatten(1, 5)(tg::zeros({2, 3})); }, S,
       {"Flatten(1, 5)", "(2, 3)"}},
      {"MnistNet: 32 x 32 images", [&] { net(tg::zeros({1, 1, 32, 32})); }, S,
       {"MnistNet", "(1, 64, 14, 14)", "9216"}},
      {"Mlp: 3 channels", [&] { mlp(tg::zeros({2, 3, 28, 28})); }, S,
       {"Mlp", "(2, 3, 28, 28)", "784"}},
  });
}

}  // namespace
