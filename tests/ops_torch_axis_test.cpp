// The ops along an axis against PyTorch itself: the reductions (max, min with their indices,
// argmax, argmin, amax, amin, logsumexp, var), the index ops (gather, scatter_add,
// index_select) and the shape ops (stack, chunk, squeeze, unsqueeze, flatten, expand, pad),
// by the shared runner (tests/ops_torch_util.h): the float64 output,
// the gradient of sum(y * w) for every input and the second derivative through create_graph to
// 1e-12 relative, the float32 forward to 1e-5, the indices exactly. Ties (inputs rounded to
// halves, given ties of two and three), NaN, -inf and inf entries are where the ops' rules show:
// max gives a tie's gradient to PyTorch's index, amax shares it evenly.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <tapegrad/ops/ops.h>
#include "ops_torch_util.h"

namespace {

using tg::Tensor;
using tg::test::MultiCase;
using Ins = const std::vector<Tensor>&;
constexpr double kInf = INFINITY, kNan = NAN;

Tensor f64(std::vector<double> v, tg::Shape s) { return tg::from_vector(v, s, tg::Dtype::f64); }

std::string args(int dim, bool keepdim) {
  return " dim=" + std::to_string(dim) + " keepdim=" + (keepdim ? "1" : "0");
}

struct Along {
  tg::Shape shape;
  int dim;
  bool keepdim;
};
const std::vector<Along> kAlong = {
    {{5}, 0, false},         {{1, 5}, 1, false},       {{1, 5}, 0, true},
    {{5, 1}, 0, false},      {{3, 5}, 0, false},       {{3, 5}, -1, true},
    {{2, 3, 4}, 1, false},   {{2, 3, 4}, -3, true},    {{2, 3, 2, 4}, 2, false},
    {{2, 1, 3, 4}, -1, true}, {{2, 3, 2, 4}, -4, false}, {{2, 1, 3, 2, 2}, 2, true},
    {{2, 1, 2, 3, 1, 2}, -3, false}};

// Entries with ties of two and three, NaN, -inf and inf, in rows of 4 (reduced along dim 1) and
// columns of 3 (dim 0).
const std::vector<Tensor>& edge_inputs() {
  static const std::vector<Tensor> e = {
      f64({1, 2, 2, 0.5, -1, 3, 3, 3, -kInf, -kInf, 1, -2}, {3, 4}),
      f64({kNan, 2, 1, kNan, -kInf, 0.5, 2, -kInf, kInf, 1, kInf, 0}, {3, 4}),
      f64({-kInf, -kInf, -kInf, -kInf, 1, -kInf, 2, 0, 0.5, 0.5, 0.5, -1}, {3, 4})};
  return e;
}

void extreme_cases(std::vector<MultiCase>& c) {
  for (const char* op : {"max", "min"}) {
    const bool mx = op[1] == 'a';
    for (const Along& a : kAlong)
      for (bool ties : {false, true}) {
        MultiCase k{op + args(a.dim, a.keepdim), {a.shape},
                    [mx, a](Ins x) { return (mx ? tg::max(x[0], a.dim, a.keepdim) : tg::min(x[0], a.dim, a.keepdim)).values; },
                    ties};
        k.indices = [mx, a](Ins x) { return (mx ? tg::max(x[0], a.dim, a.keepdim) : tg::min(x[0], a.dim, a.keepdim)).indices; };
        c.push_back(k);
      }
    for (const Tensor& e : edge_inputs())
      for (int dim : {0, 1}) {
        MultiCase k{op + args(dim, false), {}, [mx, dim](Ins x) { return (mx ? tg::max(x[0], dim) : tg::min(x[0], dim)).values; }};
        k.given = {e};
        k.indices = [mx, dim](Ins x) { return (mx ? tg::max(x[0], dim) : tg::min(x[0], dim)).indices; };
        c.push_back(k);
      }
  }
  for (const char* op : {"argmax", "argmin"}) {
    const bool mx = op[4] == 'a';
    auto values = [mx](const Tensor& x, int dim, bool keep) {
      return (mx ? tg::max(x, dim, keep) : tg::min(x, dim, keep)).values;
    };
    for (const Along& a : kAlong) {
      MultiCase k{op + args(a.dim, a.keepdim), {a.shape}, [values, a](Ins x) { return values(x[0], a.dim, a.keepdim); }, true};
      k.indices = [mx, a](Ins x) { return mx ? tg::argmax(x[0], a.dim, a.keepdim) : tg::argmin(x[0], a.dim, a.keepdim); };
      c.push_back(k);
    }
    for (const Tensor& e : edge_inputs()) {
      MultiCase k{std::string(op), {}, [values](Ins x) { return values(tg::reshape(x[0], {-1}), 0, false); }};
      k.given = {e};
      k.indices = [mx](Ins x) { return mx ? tg::argmax(x[0]) : tg::argmin(x[0]); };
      c.push_back(k);
    }
    for (const tg::Shape& s : {tg::Shape{3, 4}, tg::Shape{2, 3, 2}, tg::Shape{}}) {
      MultiCase k{std::string(op), {s}, [values](Ins x) { return values(tg::reshape(x[0], {-1}), 0, false); }};
      k.indices = [mx](Ins x) { return mx ? tg::argmax(x[0]) : tg::argmin(x[0]); };
      c.push_back(k);
    }
  }
  for (const char* op : {"amax", "amin"}) {
    const bool mx = op[2] == 'a';
    auto f = [mx](const Tensor& x, int dim, bool keep) { return mx ? tg::amax(x, dim, keep) : tg::amin(x, dim, keep); };
    for (const Along& a : kAlong)
      for (bool ties : {false, true})
        c.push_back({op + args(a.dim, a.keepdim), {a.shape}, [f, a](Ins x) { return f(x[0], a.dim, a.keepdim); }, ties});
    for (const Tensor& e : edge_inputs())
      for (int dim : {0, 1}) {
        MultiCase k{op + args(dim, true), {}, [f, dim](Ins x) { return f(x[0], dim, true); }};
        k.given = {e};
        c.push_back(k);
      }
  }
}

void logsumexp_var_cases(std::vector<MultiCase>& c) {
  for (const Along& a : kAlong) {
    c.push_back({"logsumexp" + args(a.dim, a.keepdim), {a.shape},
                 [a](Ins x) { return tg::logsumexp(x[0], a.dim, a.keepdim); }});
    for (int corr : {0, 1, 2})
      c.push_back({"var" + args(a.dim, a.keepdim) + " correction=" + std::to_string(corr), {a.shape},
                   [a, corr](Ins x) { return tg::var(x[0], a.dim, corr, a.keepdim); }});
  }
  for (const Tensor& e : {edge_inputs()[0], edge_inputs()[2], f64({-800, 800, 799, 0, 1000, 1000.5}, {2, 3})})
    for (int dim : {0, 1}) {
      MultiCase k{"logsumexp" + args(dim, false), {}, [dim](Ins x) { return tg::logsumexp(x[0], dim); }};
      k.given = {e};
      c.push_back(k);
    }
  MultiCase inf{"logsumexp" + args(1, false), {}, [](Ins x) { return tg::logsumexp(x[0], 1); }};
  inf.given = {edge_inputs()[1]};  // NaN and inf entries
  c.push_back(inf);
  MultiCase big{"var" + args(1, true) + " correction=1", {}, [](Ins x) { return tg::var(x[0], 1, 1, true); }};
  big.given = {f64({1e6, 1e6 + 1, 1e6 + 3, 1e6 - 2, -5, 0.25, 0.5, 8}, {2, 4})};
  c.push_back(big);
}

void gather_cases(std::vector<MultiCase>& c) {
  struct G {
    tg::Shape x;
    int dim;
    Tensor index;
  };
  const std::vector<G> gs = {
      {{2, 3}, 1, tg::from_indices({2, 0, 2, 1, 1, 1}, {2, 3})},
      {{3, 3}, 0, tg::from_indices({1, 0, 2, 0, 0, 2}, {2, 3})},
      {{3, 4}, -1, tg::from_indices({2, 0, 2, 1, 1, 1}, {2, 3})},
      {{4}, 0, tg::from_indices({3, 3, 0, 1, 2}, {5})},
      {{1, 5}, 1, tg::from_indices({4, 0, 0}, {1, 3})},
      {{4, 1}, 0, tg::from_indices({3, 1, 1}, {3, 1})},
      {{2, 3, 2}, 1, tg::from_indices({0, 1, 2, 2, 1, 0, 0, 0}, {2, 2, 2})},
      {{2, 2, 3, 2}, 2, tg::from_indices({2, 0, 1, 1, 0, 2, 2, 2}, {2, 2, 1, 2})},
      {{2, 2, 3, 2}, -4, tg::from_indices({1, 0, 1, 1}, {1, 2, 1, 2})},
      {{2, 1, 1, 3, 1, 2}, 3, tg::from_indices({1, 0, 2, 2, 0, 1, 1, 1}, {2, 1, 1, 2, 1, 2})}};
  for (const G& g : gs) {
    MultiCase k{"gather dim=" + std::to_string(g.dim), {g.x},
                [g](Ins x) { return tg::gather(x[0], g.dim, g.index); }};
    k.index = g.index;
    c.push_back(k);
    MultiCase s{"scatter_add dim=" + std::to_string(g.dim), {g.x, g.index.shape()},
                [g](Ins x) { return tg::scatter_add(x[0], g.dim, g.index, x[1]); }};
    s.index = g.index;
    c.push_back(s);
  }
}


// Joined, cut and padded shapes; every output is multiplied by fixed random weights in the
// runner, so each piece of chunk (concatenated back) and each stacked input shows up.
void shape_cases(std::vector<MultiCase>& c) {
  for (const auto& [s, n, dim] : std::vector<std::tuple<tg::Shape, int, int>>{
           {{2, 3}, 2, 0}, {{2, 3}, 3, -1}, {{3, 1}, 2, 2}, {{}, 3, 0}, {{2, 1, 3}, 2, -2}, {{2, 1, 3}, 3, 3}}) {
    std::vector<tg::Shape> shapes(n, s);
    c.push_back({"stack dim=" + std::to_string(dim), shapes, [dim = dim](Ins x) { return tg::stack(x, dim); }});
  }
  for (const auto& [s, n, dim] : std::vector<std::tuple<tg::Shape, int, int>>{
           {{4, 3}, 2, 0}, {{2, 5}, 3, -1}, {{6, 2}, 4, 0}, {{5}, 5, 0}, {{2, 7, 3}, 3, 1}, {{1, 6}, 4, 1}}) {
    // The pieces scaled by 1, 2, 3 ... and joined again: each piece is its own output.
    c.push_back({"chunk chunks=" + std::to_string(n) + " dim=" + std::to_string(dim), {s},
                 [n = n, dim = dim](Ins x) {
                   auto p = tg::chunk(x[0], n, dim);
                   for (std::size_t k = 0; k < p.size(); ++k) p[k] = tg::mul(p[k], tg::scale(p[k], static_cast<double>(k + 1)));
                   return tg::cat(p, dim);
                 }});
  }
  for (const auto& [s, dim] : std::vector<std::pair<tg::Shape, int>>{{{3, 1, 2}, 1}, {{3, 2}, 0}, {{4, 1}, -1}, {{1, 1, 2}, -3}})
    c.push_back({"squeeze dim=" + std::to_string(dim), {s}, [dim = dim](Ins x) { return tg::squeeze(x[0], dim); }});
  c.push_back({"squeeze", {{1, 3, 1, 2}}, [](Ins x) { return tg::squeeze(x[0]); }});
  for (const auto& [s, dim] : std::vector<std::pair<tg::Shape, int>>{{{2, 3}, 0}, {{2, 3}, -1}, {{}, 0}, {{2, 1, 3}, 2}, {{2, 3}, -3}, {{2, 1, 3, 1, 2}, 3}})
    c.push_back({"unsqueeze dim=" + std::to_string(dim), {s}, [dim = dim](Ins x) { return tg::unsqueeze(x[0], dim); }});
  for (const auto& [s, a, b] : std::vector<std::tuple<tg::Shape, int, int>>{
           {{2, 3, 2}, 0, -1}, {{2, 3, 2}, 1, -1}, {{2, 3, 2, 2}, 1, -2}, {{}, 0, -1}, {{1, 5}, 0, 0}, {{2, 3, 2, 2}, -4, 1}})
    c.push_back({"flatten start=" + std::to_string(a) + " end=" + std::to_string(b), {s},
                 [a = a, b = b](Ins x) { return tg::flatten(x[0], a, b); }});
  for (const auto& [s, to] : std::vector<std::pair<tg::Shape, std::vector<int64_t>>>{
           {{3}, {2, 3}}, {{2, 1}, {-1, 4}}, {{1, 3}, {2, 2, -1}}, {{2, 1, 3, 1}, {2, 2, -1, 2}}, {{}, {2, 3}},
           {{2, 1, 3, 1}, {2, 1, 2, -1, 3, 2}}}) {
    std::string sizes;
    for (int64_t v : to) sizes += (sizes.empty() ? "" : ",") + std::to_string(v);
    c.push_back({"expand sizes=" + sizes, {s}, [to = to](Ins x) { return tg::expand(x[0], to); }});
  }
  for (const auto& [s, p, v] : std::vector<std::tuple<tg::Shape, std::vector<int64_t>, double>>{
           {{2, 3}, {1, 2}, 0}, {{2, 3}, {1, 0, 2, 1}, 1.5}, {{3, 4}, {-1, 1, 1, -2}, 0}, {{4}, {0, 3}, -2},
           {{2, 1, 2, 3}, {1, 0, 0, 2, 1, 1}, 0.25}, {{2, 2}, {}, 0}, {{2, 3}, {-1, -2}, 0}, {{2, 3}, {0, 0, 1, 1}, -INFINITY},
           {{2, 1, 2, 1, 2, 2}, {1, 0, -1, 1, 0, 2}, 0.5}}) {
    std::string pads;
    for (int64_t e : p) pads += (pads.empty() ? "" : ",") + std::to_string(e);
    MultiCase k{"pad value=" + tg::test::hex_double(v) + " pads=" + pads, {s},
                [p = p, v = v](Ins x) { return tg::pad(x[0], p, v); }};
    c.push_back(k);
  }
  for (const auto& [s, dim, idx] : std::vector<std::tuple<tg::Shape, int, Tensor>>{
           {{3, 2}, 0, tg::from_indices({2, 0, 2, 2}, {4})}, {{2, 4}, -1, tg::from_indices({3, 1}, {2})},
           {{2, 3}, 1, tg::from_indices({1}, {})}, {{5}, 0, tg::from_indices({4, 4, 0}, {3})},
           {{2, 3, 2}, 1, tg::from_indices({2, 0}, {2})}, {{2, 3, 2, 2}, -3, tg::from_indices({1, 1, 2}, {3})},
           {{3, 2}, 0, tg::from_indices({}, {0})}}) {
    MultiCase k{"index_select dim=" + std::to_string(dim), {s}, [dim = dim, idx = idx](Ins x) { return tg::index_select(x[0], dim, idx); }};
    k.index = idx;
    c.push_back(k);
  }
}

TEST(OpsTorch, ReductionsIndexAndShapeOpsMatchPyTorch) {
  std::vector<MultiCase> c;
  extreme_cases(c);
  logsumexp_var_cases(c);
  gather_cases(c);
  shape_cases(c);
  tg::test::run_multi_cases(c, 2028, TAPEGRAD_OPS_REFERENCE_PY);
}

}  // namespace
