#pragma once
// The random-graph generator of random_graph_test.cpp: a seeded generator composes random DAGs
// of every op (random_graph_test.cpp's header says which and how), and check() runs gradcheck
// and gradgradcheck on one. A Graph describes itself, one line per node, for a failure message.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/op_list.h>
#include <tapegrad/ops/ops.h>

namespace tg::random_graph {

using Args = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Args&)>;

enum class Op { Leaf, Matmul, Transpose, Permute, Reshape, Scale, AddMask, Softmax, SumOfSquares,
                Add, Sub, Mul, Sum, BroadcastTo, SumTo, Rope, Attention, Listed, Custom, kCount };
inline constexpr int kOps = static_cast<int>(Op::kCount);
inline constexpr const char* kOpName[kOps] = {
    "leaf", "matmul", "transpose", "permute", "reshape", "scale", "add_mask", "softmax",
    "sum_of_squares", "add", "sub", "mul", "sum", "broadcast_to", "sum_to", "rope",
    "causal_attention", "listed", "custom"};
constexpr int64_t kMaxNumel = 64, kFullSecondOrder = 40;
constexpr double kMaxAbs = 20.0;
constexpr uint64_t kBaseSeed = 20240601;
constexpr int kShards = 8, kPerShard = 500;

// The elementwise ops of the op list the generator composes generically (Op::Listed): every
// unary and binary op but those it builds by hand.
const std::vector<const tg::OpInfo*>& listed_ops();

// A unary, shape-preserving op plugged into the generator (the negative controls).
struct CustomOp {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
};

struct Node {
  Op op = Op::Leaf;
  std::string name;     // the op's name
  std::vector<int> in;  // ids of the input nodes
  Shape shape;          // predicted by the generator, checked against what the op returns
  std::string note;     // the op's parameters: ", transpose_b", ", axis=-1, keepdim"
  OpFn fn;              // the op applied to the inputs' values
  bool hidden() const { return op == Op::AddMask; }  // holds -inf: only its softmax reads it
};

struct Graph {
  uint64_t seed = 0;
  int leaves = 0;
  bool reduce = true;  // L = sum_k sum(mul(sink_k, W_k)), else the sinks themselves
  std::vector<Node> nodes;
  std::vector<int> sinks;
  std::vector<Tensor> inputs, weights;  // weights: one per sink when reduced

  bool uses(Op op) const {
    return std::any_of(nodes.begin(), nodes.end(), [op](const Node& n) { return n.op == op; });
  }
  std::string describe() const {
    std::ostringstream s;
    s << "graph seed " << seed << " (replay: TAPEGRAD_GRAPH_SEED=" << seed << ")\n";
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      s << "  %" << i << " = " << nodes[i].name << "(";
      if (nodes[i].op == Op::Leaf) s << "x" << i;
      for (std::size_t k = 0; k < nodes[i].in.size(); ++k) s << (k ? ", %" : "%") << nodes[i].in[k];
      s << nodes[i].note << ")  " << nodes[i].shape.str() << "\n";
    }
    s << "  output:";
    for (std::size_t k = 0; k < sinks.size(); ++k)
      s << (reduce ? (k ? " + sum(mul(%" : " sum(mul(%") : " %") << sinks[k]
        << (reduce ? ", W" + std::to_string(k) + "))" : "");
    return s.str() + "\n";
  }
};

// The batch axes of a matmul operand: all but the last two.
Shape batch_of(const Shape& s);

// Evaluates the graph on `xs` (one tensor per leaf): the function gradcheck sees.
std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& xs);

// The graph of `seed`; with `custom`, that op is drawn with weight custom_weight too.
Graph generate(uint64_t seed, const CustomOp* custom = nullptr, double custom_weight = 0);

struct Verdict {
  bool first, second, vacuous;
  std::string message;
};

// gradcheck and gradgradcheck (fast mode above kFullSecondOrder elements) of the graph.
Verdict check(const Graph& g);

// Pins one thread: an OpenMP team started by the fused attention costs milliseconds on busy CI
// cores (10x the sweep when it starts one per call), and results do not depend on the count.
struct Threads {
  int prev = tg::num_threads();
  explicit Threads(int n) { tg::set_num_threads(n); }
  ~Threads() { tg::set_num_threads(prev); }
};

}  // namespace tg::random_graph
