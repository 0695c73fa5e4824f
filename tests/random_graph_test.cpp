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

#include "check/gradcheck.h"
#include "ops/op_list.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "ops/ops.h"

namespace {

using tg::Shape;
using tg::Tensor;
using Args = std::vector<Tensor>;
using OpFn = std::function<Tensor(const Args&)>;

enum class Op { Leaf, Matmul, Transpose, Permute, Reshape, Scale, AddMask, Softmax, SumOfSquares,
                Add, Sub, Mul, Sum, BroadcastTo, SumTo, Rope, Attention, Listed, Custom, kCount };
constexpr int kOps = static_cast<int>(Op::kCount);
constexpr const char* kOpName[kOps] = {
    "leaf", "matmul", "transpose", "permute", "reshape", "scale", "add_mask", "softmax",
    "sum_of_squares", "add", "sub", "mul", "sum", "broadcast_to", "sum_to", "rope",
    "causal_attention", "listed", "custom"};
constexpr int64_t kMaxNumel = 64, kFullSecondOrder = 40;
constexpr double kMaxAbs = 20.0;
constexpr uint64_t kBaseSeed = 20240601;
constexpr int kShards = 8, kPerShard = 500;

// The elementwise ops of the op list the generator composes generically (Op::Listed): every
// unary and binary op but those it builds by hand above.
const std::vector<const tg::OpInfo*>& listed_ops() {
  static const std::vector<const tg::OpInfo*> ops = [] {
    std::vector<const tg::OpInfo*> out;
    for (const tg::OpInfo& op : tg::op_list()) {
      const bool by_hand = std::find(std::begin(kOpName), std::end(kOpName),
                                     std::string(op.name)) != std::end(kOpName);
      if (op.kind != tg::OpKind::other && !by_hand) out.push_back(&op);
    }
    return out;
  }();
  return ops;
}

// Inputs mapped into an op's domain: x^2 + 1/2 for the positive ones.
Tensor in_domain(const tg::OpInfo& op, const Tensor& x) {
  return op.domain == tg::OpDomain::positive ? tg::add(tg::mul(x, x), 0.5) : x;
}

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

Tensor apply(const Node& n, std::size_t id, const std::vector<Tensor>& values) {
  Args args;
  for (int i : n.in) args.push_back(values[i]);
  Tensor y = n.fn(args);
  if (y.shape() == n.shape) return y;
  std::ostringstream m;
  m << "%" << id << " = " << n.name << ": expected shape " << n.shape.str() << ", got "
    << y.shape().str();
  throw std::logic_error(m.str());
}

// Evaluates the graph on `xs` (one tensor per leaf): the function gradcheck sees.
std::vector<Tensor> run(const Graph& g, const std::vector<Tensor>& xs) {
  std::vector<Tensor> v(xs.begin(), xs.end()), out;
  for (std::size_t i = g.leaves; i < g.nodes.size(); ++i) v.push_back(apply(g.nodes[i], i, v));
  for (std::size_t k = 0; k < g.sinks.size(); ++k) {
    if (!g.reduce) { out.push_back(v[g.sinks[k]]); continue; }
    const Tensor t = tg::sum(tg::mul(v[g.sinks[k]], g.weights[k]));
    out = {out.empty() ? t : tg::add(out[0], t)};
  }
  return out;
}

// numpy broadcasting, written here independently of the library's.
std::optional<Shape> bcast(const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> d(r);
  for (int i = 0; i < r; ++i) {
    const int64_t x = i - r + a.rank() >= 0 ? a[i - r + a.rank()] : 1;
    const int64_t y = i - r + b.rank() >= 0 ? b[i - r + b.rank()] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    d[i] = x == 1 ? y : x;
  }
  return Shape(d);
}
Shape batch_of(const Shape& s) {
  const std::vector<int64_t> d = s.vec();
  return Shape(std::vector<int64_t>(d.begin(), d.end() - 2));
}
int64_t last(const Shape& s, int k = 1) { return s[s.rank() - k]; }
template <class V>
std::string list(const char* name, const V& v) {
  std::ostringstream s;
  s << name;
  for (auto x : v) s << " " << x;
  return s.str();
}

class Generator {
 public:
  Generator(uint64_t seed, const CustomOp* custom, double custom_weight)
      : rng_(seed), custom_(custom) {
    g_.seed = seed;
    w_.fill(1.0);  // how often each op is tried
    w_[int(Op::Matmul)] = w_[int(Op::Add)] = w_[int(Op::Mul)] = 1.5;
    w_[int(Op::Leaf)] = 0, w_[int(Op::Custom)] = custom ? custom_weight : 0;
    w_[int(Op::Listed)] = 3;  // stands for several ops
  }

  Graph make() {
    g_.leaves = uniform_int(1, 3);
    for (int i = 0; i < g_.leaves; ++i) {
      std::vector<int64_t> d(uniform_int(1, 4));
      for (auto& x : d) x = uniform_int(1, 4);
      while (Shape(d).numel() > 24)
        if (int64_t& x = d[uniform_int(0, int(d.size()) - 1)]; x > 1) --x;
      g_.inputs.push_back(tg::randn(Shape(d), rng_));
      g_.nodes.push_back(Node{Op::Leaf, "leaf", {}, Shape(d), "", nullptr});
      vals_.push_back(g_.inputs.back());
    }
    double total = 0;
    for (double x : w_) total += x;
    for (int tries = 0, added = 0, n = uniform_int(2, 8); added < n && tries < 100; ++tries) {
      double r = rng_.uniform(0, total);
      int k = 0;
      while (r >= w_[k] && k + 1 < kOps) r -= w_[k++];
      const std::size_t mark = g_.nodes.size();
      if (build(Op(k))) { ++added; continue; }
      g_.nodes.resize(mark);  // roll back a rejected node and its helpers
      vals_.resize(mark);
    }
    int64_t out_numel = 0;
    for (int i = 0; i <= newest(); ++i)
      if (!consumed(i) && !g_.nodes[i].hidden())
        g_.sinks.push_back(i), out_numel += shape(i).numel();
    g_.reduce = out_numel > 12 || chance(0.7);
    if (g_.reduce) for (int s : g_.sinks) g_.weights.push_back(tg::randn(shape(s), rng_));
    return std::move(g_);
  }

 private:
  int uniform_int(int lo, int hi) { return lo + int(rng_.engine()() % uint64_t(hi - lo + 1)); }
  bool chance(double p) { return rng_.uniform(0, 1) < p; }
  const Shape& shape(int i) const { return g_.nodes[i].shape; }
  int newest() const { return int(g_.nodes.size()) - 1; }
  bool consumed(int i) const {
    for (const Node& n : g_.nodes) for (int j : n.in) if (j == i) return true;
    return false;
  }

  // A random visible node whose shape satisfies ok (half the time an unconsumed one), or -1.
  int pick(const std::function<bool(const Shape&)>& ok) {
    std::vector<int> all, fresh;
    for (int i = 0; i <= newest(); ++i) {
      if (g_.nodes[i].hidden() || !ok(shape(i))) continue;
      all.push_back(i);
      if (!consumed(i)) fresh.push_back(i);
    }
    const auto& from = !fresh.empty() && chance(0.5) ? fresh : all;
    return from.empty() ? -1 : from[uniform_int(0, int(from.size()) - 1)];
  }

  // Appends op(in) of the predicted shape after running it eagerly; false when its values are
  // too large or too many (the caller rolls back).
  template <class... Note>
  bool push(Op op, std::vector<int> in, const Shape& s, OpFn fn, const Note&... note) {
    std::ostringstream n;
    ((n << ", " << note), ...);
    Node node{op, op == Op::Custom ? custom_->name : kOpName[int(op)], std::move(in), s, n.str(),
              std::move(fn)};
    const Tensor y = [&] { tg::NoGradGuard no_grad; return apply(node, g_.nodes.size(), vals_); }();
    if (y.numel() > kMaxNumel) return false;
    for (double v : y.to_vector()) if (!node.hidden() && !(std::fabs(v) <= kMaxAbs)) return false;
    g_.nodes.push_back(std::move(node));
    vals_.push_back(y);
    return true;
  }
  bool reshape_to(int c, std::vector<int64_t> d) {
    const Shape s(d);
    if (!d.empty() && chance(0.3)) d[uniform_int(0, int(d.size()) - 1)] = -1;
    return push(Op::Reshape, {c}, s, [d](const Args& x) { return tg::reshape(x[0], d); },
                list("dims", d));
  }
  bool build(Op op);
  bool build_listed();
  bool build_binary(Op op, int a);
  bool build_matmul(int a, bool ta, bool tb, bool self);

  tg::Rng rng_;
  const CustomOp* custom_;
  std::array<double, kOps> w_;
  Graph g_;
  std::vector<Tensor> vals_;  // the nodes' values, for shapes and magnitudes
};

bool Generator::build(Op op) {
  std::function<bool(const Shape&)> ok = [](const Shape&) { return true; };
  if (op == Op::Transpose || op == Op::Permute || op == Op::Matmul || op == Op::AddMask ||
      op == Op::Attention)
    ok = [](const Shape& s) { return s.rank() >= 2; };
  if (op == Op::Listed) return build_listed();
  if (op == Op::Softmax || op == Op::Custom) ok = [](const Shape& s) { return s.rank() >= 1; };
  if (op == Op::Rope) ok = [](const Shape& s) { return s.rank() >= 2 && last(s) % 2 == 0; };
  const int a = pick(ok);
  if (a < 0) return false;
  const Shape s = shape(a);
  std::vector<int64_t> d = s.vec();
  switch (op) {
    case Op::Matmul: return build_matmul(a, chance(0.3), chance(0.3), false);
    case Op::Add: case Op::Sub: case Op::Mul: return build_binary(op, a);
    case Op::Softmax: return push(op, {a}, s, [](const Args& x) { return tg::softmax(x[0]); });
    case Op::Custom: return push(op, {a}, s, [f = custom_->fn](const Args& x) { return f(x[0]); });
    case Op::SumOfSquares:
      return push(op, {a}, Shape{}, [](const Args& x) { return tg::sum_of_squares(x[0]); });
    case Op::Scale: {
      const double c = (chance(0.5) ? -1 : 1) * rng_.uniform(0.25, 2.0);
      return push(op, {a}, s, [c](const Args& x) { return tg::scale(x[0], c); }, c);
    }
    case Op::Rope: {
      const double base = std::array<double, 3>{10000.0, 100.0, 3.0}[uniform_int(0, 2)];
      const bool inverse = chance(0.3);
      return push(op, {a}, s, [=](const Args& x) { return tg::rope(x[0], base, inverse); },
                  "base=" + std::to_string(int(base)), inverse ? "inverse" : "forward");
    }
    case Op::Transpose:
      std::swap(d[d.size() - 1], d[d.size() - 2]);
      return push(op, {a}, Shape(d), [](const Args& x) { return tg::transpose(x[0]); });
    case Op::Permute: {
      std::vector<int> p;
      for (int i = 0; i < s.rank(); ++i) p.insert(p.begin() + uniform_int(0, i), i);
      for (int i = 0; i < s.rank(); ++i) d[i] = s[p[i]];
      return push(op, {a}, Shape(d), [p](const Args& x) { return tg::permute(x[0], p); },
                  list("perm", p));
    }
    case Op::Reshape: {  // the prime factors of numel spread over a random rank
      std::vector<int64_t> t(uniform_int(s.numel() == 1 ? 0 : 1, 4), 1);
      for (int64_t p = 2, m = s.numel(); m > 1;)
        if (m % p == 0) t[uniform_int(0, int(t.size()) - 1)] *= p, m /= p; else ++p;
      return reshape_to(a, t);
    }
    case Op::Sum: {
      if (s.rank() == 0 || chance(0.3))
        return push(op, {a}, Shape{}, [](const Args& x) { return tg::sum(x[0]); });
      const int axis = uniform_int(-s.rank(), s.rank() - 1), ax = (axis + s.rank()) % s.rank();
      const bool keep = chance(0.5);
      if (keep) d[ax] = 1; else d.erase(d.begin() + ax);
      return push(op, {a}, Shape(d), [=](const Args& x) { return tg::sum(x[0], axis, keep); },
                  "axis=" + std::to_string(axis), keep ? "keepdim" : "dropdim");
    }
    case Op::BroadcastTo: {  // new leading axes, and size-1 axes stretched
      std::vector<int64_t> t;
      for (int i = uniform_int(s.rank(), 4) - s.rank(); i > 0; --i) t.push_back(uniform_int(1, 3));
      for (int i = 0; i < s.rank(); ++i) t.push_back(s[i] == 1 ? uniform_int(1, 3) : s[i]);
      const Shape to(t);
      return push(op, {a}, to, [to](const Args& x) { return tg::broadcast_to(x[0], to); },
                  to.str());
    }
    case Op::SumTo: {  // leading axes dropped, others squeezed to 1
      std::vector<int64_t> t;
      for (int i = uniform_int(0, s.rank()); i < s.rank(); ++i) t.push_back(chance(0.4) ? 1 : s[i]);
      const Shape to(t);
      return push(op, {a}, to, [to](const Args& x) { return tg::sum_to(x[0], to); }, to.str());
    }
    case Op::AddMask: {  // then softmax: the -inf entries reach nothing else
      int q = a;         // a square node, or the scores a a^T
      if (last(s) != last(s, 2) || chance(0.5)) {
        if (!build_matmul(a, false, true, true)) return false;
        q = newest();
      }
      const int64_t w = chance(0.3) ? uniform_int(1, int(last(shape(q)))) : 0;
      return push(op, {q}, shape(q), [w](const Args& x) {
               return tg::add_mask(x[0], tg::causal_mask(x[0].size(-1), x[0].dtype(), w));
             }, "causal_mask(window=" + std::to_string(w) + ")") &&
             push(Op::Softmax, {newest()}, shape(q),
                  [](const Args& x) { return tg::softmax(x[0]); });
    }
    case Op::Attention: {  // Q (.., T, d), K like Q, V (.., T, d_v)
      const int k = pick([&](const Shape& t) { return t == s; });
      const int v = pick([&](const Shape& t) {
        bool fits = t.rank() == s.rank();
        for (int i = 0; fits && i + 1 < t.rank(); ++i) fits = t[i] == s[i];
        return fits;
      });
      const double c = rng_.uniform(0.3, 1.2);
      const int64_t w = chance(0.3) ? uniform_int(1, int(last(s, 2))) : 0;
      return push(op, {a, k, v}, shape(v),
                  [=](const Args& x) { return tg::causal_attention(x[0], x[1], x[2], c, w); },
                  "scale=" + std::to_string(c), "window=" + std::to_string(w));
    }
    default: return false;
  }
}

// One of listed_ops() on a random node (and, for a binary one, a node that broadcasts with it),
// its inputs mapped into the op's domain.
bool Generator::build_listed() {
  const tg::OpInfo& op = *listed_ops()[uniform_int(0, int(listed_ops().size()) - 1)];
  const int a = pick([](const Shape&) { return true; });
  bool ok;
  if (op.kind == tg::OpKind::unary) {
    ok = push(Op::Listed, {a}, shape(a),
              [&op](const Args& x) { return op.call({in_domain(op, x[0])}); });
  } else {
    const int b = pick([&](const Shape& s) { return bcast(shape(a), s).has_value(); });
    ok = push(Op::Listed, {a, b}, *bcast(shape(a), shape(b)), [&op](const Args& x) {
      return op.call({x[0], in_domain(op, x[1])});
    });
  }
  if (ok) g_.nodes.back().name = op.name;
  return ok;
}

// a op b with b broadcasting against a: another node, or some node reshaped to a shape that
// broadcasts against a (leading axes dropped, some axes squeezed to 1); the order is random.
bool Generator::build_binary(Op op, int a) {
  const Shape sa = shape(a);
  int b = pick([&](const Shape& s) { return bcast(sa, s).has_value(); });
  if (chance(0.4)) {
    const int c = pick([](const Shape&) { return true; });
    std::vector<std::vector<int64_t>> fits;
    for (int drop = 0; drop <= sa.rank(); ++drop)
      for (int mask = 0; mask < (1 << (sa.rank() - drop)); ++mask) {
        std::vector<int64_t> t;
        for (int i = drop; i < sa.rank(); ++i) t.push_back(mask >> (i - drop) & 1 ? sa[i] : 1);
        if (Shape(t).numel() == shape(c).numel()) fits.push_back(t);
      }
    if (!fits.empty() && reshape_to(c, fits[uniform_int(0, int(fits.size()) - 1)])) b = newest();
  }
  if (chance(0.5)) std::swap(a, b);
  const OpFn fns[] = {[](const Args& x) { return tg::add(x[0], x[1]); },
                      [](const Args& x) { return tg::sub(x[0], x[1]); },
                      [](const Args& x) { return tg::mul(x[0], x[1]); }};
  return push(op, {a, b}, *bcast(shape(a), shape(b)), fns[int(op) - int(Op::Add)]);
}

// op(a) @ op(b): unless `self`, b is a node whose inner and batch axes fit, or some node
// reshaped to (K, N), (N, K) or (1, K, N); else (or failing those) a itself: a a^T or a^T a.
bool Generator::build_matmul(int a, bool ta, bool tb, bool self) {
  const Shape sa = shape(a);
  const int64_t K = ta ? last(sa, 2) : last(sa), M = ta ? last(sa) : last(sa, 2);
  int b = self ? -1 : pick([&](const Shape& s) {
    return s.rank() >= 2 && (tb ? last(s) : last(s, 2)) == K && bcast(batch_of(sa), batch_of(s));
  });
  const int c = self || (b >= 0 && chance(0.7)) ? -1
                : pick([&](const Shape& s) { return s.numel() % K == 0 && s.numel() / K <= 6; });
  if (c >= 0) {
    const int64_t N = shape(c).numel() / K;
    std::vector<int64_t> d = tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
    if (chance(0.3)) d.insert(d.begin(), 1);
    if (reshape_to(c, d)) b = newest();
  }
  if (b < 0) b = a, tb = !ta;
  const Shape sb = shape(b);
  std::vector<int64_t> d = bcast(batch_of(sa), batch_of(sb))->vec();
  d.push_back(M);
  d.push_back(tb ? last(sb, 2) : last(sb));
  return push(Op::Matmul, {a, b}, Shape(d),
              [ta, tb](const Args& x) { return tg::matmul(x[0], x[1], ta, tb); },
              ta ? "transpose_a" : "a", tb ? "transpose_b" : "b");
}

Graph generate(uint64_t seed, const CustomOp* custom = nullptr, double custom_weight = 0) {
  return Generator(seed, custom, custom_weight).make();
}

struct Verdict {
  bool first, second, vacuous;
  std::string message;
};

Verdict check(const Graph& g) {
  const tg::Function f = [&g](const std::vector<Tensor>& xs) { return run(g, xs); };
  tg::GradcheckOptions o;
  o.warn_vacuous = false;
  o.seed = g.seed;
  const tg::GradcheckResult r1 = tg::gradcheck(f, g.inputs, o);
  int64_t n = 0;
  for (const Tensor& x : g.inputs) n += x.numel();
  for (int s : g.sinks) n += g.reduce ? 0 : g.nodes[s].shape.numel();
  o.fast_mode = n > kFullSecondOrder;
  const tg::GradcheckResult r2 = tg::gradgradcheck(f, g.inputs, o);
  return {r1.passed, r2.passed, r1.vacuous,
          "gradcheck: " + r1.message + "\ngradgradcheck: " + r2.message};
}

// Pins one thread: an OpenMP team started by the fused attention costs milliseconds on busy CI
// cores (10x the sweep when it starts one per call), and results do not depend on the count.
struct Threads {
  int prev = tg::num_threads();
  explicit Threads(int n) { tg::set_num_threads(n); }
  ~Threads() { tg::set_num_threads(prev); }
};

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
      {"causal_attention_heads", "packed heads need a last axis divisible by H"},
      {"cat", "several inputs of matching shapes"},
      {"cross_entropy", "int64 targets"},
      {"dropout", "random: a mask per call"},
      {"embedding", "int64 indices"},
      {"layer_norm", "(C,) weight and bias"},
      {"log_softmax", "the registry covers its masked rows"},
      {"mean", "the registry covers its axes"},
      {"narrow", "a range inside one axis"},
      {"split", "several outputs"},
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
