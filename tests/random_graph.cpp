// The random-graph generator (random_graph.h): shapes predicted independently of the library,
// and values kept within [-kMaxAbs, kMaxAbs] so that the graphs stay well conditioned.

#include "random_graph.h"

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

namespace tg::random_graph {

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

Graph generate(uint64_t seed, const CustomOp* custom, double custom_weight) {
  return Generator(seed, custom, custom_weight).make();
}

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

}  // namespace tg::random_graph
