// Random-graph property tests. A seeded generator composes random DAGs of every op in ops/ops.h
// (matmul with transpose flags and batch broadcasting, transpose, permute, reshape, scale,
// add_mask with a causal mask, softmax, sum_of_squares, add / sub / mul with broadcasting, sum
// (all / axis / keepdim), broadcast_to, sum_to, rope, causal_attention) over 1..3 float64 leaves
// of rank 1-4 and dims 1..4, with fan-out; it ends in L = sum_k sum(mul(sink_k, W_k)) over the
// nodes nobody consumes (W_k fixed random weights) or returns those sinks when they are small.
// Every graph must pass gradcheck and gradgradcheck at the default tolerances.
//
// Numbers: 4000 graphs in 8 shards of 500 (ctest runs shards in parallel); 8 nodes on average
// (at most 17, leaves included), 19 leaf elements on average. gradcheck is always the full
// Jacobian; gradgradcheck is full when leaves plus outputs hold <= 40 elements (92% of graphs),
// fast mode (random projections) above. Release, 2 busy cores: 1-3 s per shard, ~20 s for the
// file. A node whose values leave [-20, 20] is rejected while generating, so graphs stay well
// conditioned. About 5% of graphs are constant functions (the sum of a softmax, x - x) and
// prove nothing; each shard requires that at most 1/8 are.
//
// A failure prints the seed and one line per node (id = op(args) shape). Replay one graph:
//   TAPEGRAD_GRAPH_SEED=<seed> ./random_graph_test --gtest_filter='Seeds/Shards.*/0'

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/ops/op_list.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "random_graph.h"

namespace {

using namespace tg::random_graph;  // Graph, generate, check, CustomOp, ...
using tg::Shape;
using tg::Tensor;

class Shards : public ::testing::TestWithParam<int> {};

TEST_P(Shards, EveryGraphPassesGradcheckAndGradgradcheck) {
  Threads one(1);
  std::vector<uint64_t> seeds;
  if (const char* env = std::getenv("TAPEGRAD_GRAPH_SEED"); env && *env) {
    if (GetParam() != 0) GTEST_SKIP() << "replaying one seed in shard 0";
    seeds = {std::strtoull(env, nullptr, 10)};
    std::cout << generate(seeds[0]).describe();  // replay mode: show the graph
  } else {
    for (int i = 0; i < kPerShard; ++i) seeds.push_back(kBaseSeed + GetParam() * kPerShard + i);
  }
  int failures = 0, vacuous = 0;
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("graph seed " + std::to_string(seed));
    std::string text;
    try {
      const Graph g = generate(seed);
      text = g.describe();
      const Verdict v = check(g);
      vacuous += v.vacuous;
      if (v.first && v.second) continue;
      text += v.message;
    } catch (const std::exception& e) {
      text += std::string("threw: ") + e.what();
    }
    if (++failures <= 5) ADD_FAILURE() << text;
  }
  EXPECT_EQ(failures, 0) << "graphs failed out of " << seeds.size();
  EXPECT_LE(vacuous, int(seeds.size()) / 8) << "too many constant graphs: the sweep proves little";
}

INSTANTIATE_TEST_SUITE_P(Seeds, Shards, ::testing::Range(0, kShards));

// The sweep's graphs use every op, both transpose flags, batch broadcasting in matmul, every
// form of sum, windows, fan-out, 1..3 leaves and both ways of ending; a seed replays its graph.
TEST(RandomGraph, GeneratorCoversEveryOpAndFeature) {
  Threads one(1);
  for (uint64_t seed : {kBaseSeed, kBaseSeed + 17}) {
    const Graph a = generate(seed), b = generate(seed);
    EXPECT_EQ(a.describe(), b.describe());
    for (std::size_t i = 0; i < a.inputs.size(); ++i)
      EXPECT_EQ(a.inputs[i].to_vector(), b.inputs[i].to_vector());
  }
  std::array<int, kOps> ops{};
  std::map<std::string, int> listed;
  std::array<int, 4> leaves{};
  const char* const kNotes[] = {"transpose_a", "transpose_b", "keepdim", "dropdim", "window=1"};
  std::array<int, 5> notes{};
  int sum_all = 0, batch_bcast = 0, fan_out = 0, reduced = 0;
  for (int i = 0; i < kShards * kPerShard; ++i) {
    const Graph g = generate(kBaseSeed + i);
    ++leaves[g.leaves];
    reduced += g.reduce;
    std::vector<int> consumers(g.nodes.size());
    for (const Node& n : g.nodes) {
      ++ops[int(n.op)];
      if (n.op == Op::Listed) ++listed[n.name];
      for (int k : n.in) ++consumers[k];
      for (int k = 0; k < 5; ++k) notes[k] += n.note.find(kNotes[k]) != std::string::npos;
      sum_all += n.op == Op::Sum && n.note.empty();
      batch_bcast += n.op == Op::Matmul &&
                     !(batch_of(g.nodes[n.in[0]].shape) == batch_of(g.nodes[n.in[1]].shape));
    }
    for (int c : consumers) fan_out += c >= 2;
  }
  for (int k = 0; k + 1 < kOps; ++k) EXPECT_GE(ops[k], 100) << kOpName[k] << " is too rare";
  for (const tg::OpInfo* op : listed_ops())
    EXPECT_GE(listed[op->name], 30) << op->name << " is too rare";
  EXPECT_EQ(ops[int(Op::Custom)], 0);
  for (int k = 1; k <= 3; ++k) EXPECT_GE(leaves[k], 200) << k << " leaves";
  for (int k = 0; k < 5; ++k) EXPECT_GE(notes[k], 50) << kNotes[k];
  for (int n : {sum_all, batch_bcast, fan_out, reduced, kShards * kPerShard - reduced})
    EXPECT_GE(n, 100);
}

// Every op of the op list takes part: built by hand above, generically (Op::Listed), or named
// here with the reason it stays out.
TEST(RandomGraph, ComposesEveryListedOp) {
  const std::map<std::string, std::string> kept_out = {
      {"amax", "ties: the registry covers its axes and ties of two"},
      {"amin", "ties: the registry covers its axes and ties of two"},
      {"avg_pool1d", "(N, C, L) inputs and a kernel that fits"},
      {"avg_pool2d", "(N, C, H, W) inputs and a kernel that fits"},
      {"causal_attention_heads", "packed heads need a last axis divisible by H"},
      {"causal_attention_qkv", "a last axis divisible by 3 H"},
      {"batch_norm", "(N, C, ...) inputs with (C,) weight, bias and running stats"},
      {"binary_cross_entropy_with_logits", "a loss: two inputs of one shape, targets in [0, 1]"},
      {"cat", "several inputs of matching shapes"},
      {"chunk", "several outputs"},
      {"conv1d", "(N, C_in, L) inputs and a weight of matching channels"},
      {"conv2d", "(N, C_in, H, W) inputs and a weight of matching channels"},
      {"cross_entropy", "int64 targets"},
      {"cross_entropy_options", "int64 targets"},
      {"dropout", "random: a mask per call"},
      {"embedding", "int64 indices"},
      {"group_norm", "(N, C, ...) inputs with C divisible by the groups"},
      {"expand", "a target shape that fits"},
      {"flatten", "the registry covers its axes"},
      {"gather", "int64 indices"},
      {"index_select", "int64 indices"},
      {"l1_loss", "a loss: two inputs of one shape"},
      {"layer_norm", "(C,) weight and bias"},
      {"linear", "an (out, in) weight whose in is the input's last axis, and an (out,) bias"},
      {"log_softmax", "the registry covers its masked rows"},
      {"log_softmax_dim", "the registry covers its dims"},
      {"logsumexp", "the registry covers its axes"},
      {"max", "reduces an axis: the registry covers its axes, PyTorch its ties"},
      {"lstm_scan", "(T, B, 4H), (4H, H), (4H,) and (B, H) inputs that fit together"},
      {"gru_scan", "(T, B, 3H), (3H, H), (3H,) and (B, H) inputs that fit together"},
      {"masked_fill", "a bool mask that broadcasts to its input: the registry covers its masks"},
      {"max_pool1d", "(N, C, L) inputs and a kernel that fits"},
      {"max_pool2d", "(N, C, H, W) inputs and a kernel that fits"},
      {"mean", "the registry covers its axes"},
      {"mean_dims", "the registry covers its dims"},
      {"min", "reduces an axis: the registry covers its axes, PyTorch its ties"},
      {"mse_loss", "a loss: two inputs of one shape"},
      {"narrow", "a range inside one axis"},
      {"nll_loss", "int64 targets"},
      {"pad", "pads that fit the rank"},
      {"rms_norm", "(C,) weight"},
      {"rotary", "(..., T, H, d) inputs with (T, d/2) tables"},
      {"scatter_add", "int64 indices"},
      {"softmax_dim", "the registry covers its dims"},
      {"split", "several outputs"},
      {"squeeze", "an axis of size 1"},
      {"stack", "several inputs of one shape"},
      {"sum_dims", "the registry covers its dims"},
      {"transpose_dims", "the registry covers its dims"},
      {"unsqueeze", "a result within the largest rank"},
      {"var", "the registry covers its axes"},
      {"where", "a bool condition: the registry covers its broadcasting"},
  };
  for (const tg::OpInfo& op : tg::op_list()) {
    const bool by_hand = std::find(std::begin(kOpName), std::end(kOpName),
                                   std::string(op.name)) != std::end(kOpName);
    const bool generic = std::find(listed_ops().begin(), listed_ops().end(), &op) != listed_ops().end();
    EXPECT_TRUE(by_hand || generic || kept_out.count(op.name))
        << op.name << ": add it to the generator or to kept_out";
  }
}

// Negative controls: an op with a deliberately wrong backward, plugged into the generator, must
// make the graphs that use it fail (gradcheck, or only gradgradcheck when the first order is
// right), and only those.
TEST(RandomGraph, WrongBackwardsAreCaught) {
  const CustomOp controls[] = {
      // softmax whose backward forgets the subtraction: dX = Y * dY.
      {"bad_softmax", [](const Tensor& x) {
         return tg::record(
             "bad_softmax", tg::softmax(x.detach()), {x}).formula([](const Tensor& dY, const Tensor& Y) -> tg::Grads { return {tg::mul(Y, dY)}; });
       }},
      // y = x^2 with dX = 2 x dY computed on raw numbers: right to first order, but the returned
      // gradient is a constant, so its own derivative is silently zero.
      {"raw_square", [](const Tensor& x) {
         const Tensor y = tg::mul(x.detach(), x.detach());
         return tg::record("raw_square", y, {x}).formula([x](const Tensor& dY) -> tg::Grads {
           std::vector<double> a = x.to_vector(), d = dY.to_vector();
           for (std::size_t i = 0; i < a.size(); ++i) a[i] = 2 * a[i] * d[i];
           return {tg::from_vector(a, x.shape(), x.dtype())};
         });
       }}};
  Threads one(1);
  for (const CustomOp& op : controls) {
    SCOPED_TRACE(op.name);
    const bool first_order_right = op.name == "raw_square";
    int with = 0, failed = 0, first_failed = 0, clean_failed = 0;
    for (int i = 0; i < 60; ++i) {
      const Graph g = generate(kBaseSeed + 1000000 + i, &op, 6.0);
      SCOPED_TRACE(g.describe());
      const Verdict v = check(g);
      const bool uses = g.uses(Op::Custom);
      with += uses;
      failed += uses && !(first_order_right ? v.second : v.first);
      first_failed += uses && !v.first;
      clean_failed += !uses && !(v.first && v.second);
    }
    ASSERT_GE(with, 30);
    EXPECT_GE(failed, with / 2) << "of " << with << " graphs using it";
    if (first_order_right) {
      EXPECT_EQ(first_failed, 0) << "its first-order gradient is right";
    }
    EXPECT_EQ(clean_failed, 0);
  }
}

}  // namespace
