// Op cases for the reductions along an axis (max, min, amax, amin, logsumexp, var) and the
// index pair gather / scatter_add. Ties: amax's even split is what central differences see
// at a tie of two (half the step raises the maximum, half leaves it), so two-way ties are
// registered; max and min give a tie's whole gradient to PyTorch's index, which no finite
// difference reproduces, so their ties (and NaN rows, and ties of three) are checked against
// PyTorch in tests/ops_torch_axis_test.cpp instead.

#include <tapegrad/check/registry_table.h>

#include <string>

#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

// The shapes every reduction takes: (shape, axis, keepdim, case name).
struct Along {
  Shape shape;
  int axis;
  bool keepdim;
  const char* name;
};
const Along kAlong[] = {
    {{5}, 0, false, "rank1"},          {{1, 5}, 1, false, "1xN"},
    {{1, 5}, 0, true, "1xN_axis0"},    {{4, 1}, 0, false, "Nx1"},
    {{3, 5}, 0, false, "non_square"},  {{3, 5}, -1, true, "non_square_keepdim"},
    {{2, 3, 4}, 1, false, "rank3"},    {{2, 3, 4}, -3, true, "rank3_axis0_keepdim"},
    {{2, 3, 2, 3}, 2, false, "rank4"}, {{2, 1, 3, 2}, -1, true, "rank4_last_keepdim"},
};

void extreme_cases(Table& t) {
  const std::pair<const char*, std::function<Tensor(const Tensor&, int, bool)>> ops[] = {
      {"max", [](const Tensor& x, int a, bool k) { return max(x, a, k).values; }},
      {"min", [](const Tensor& x, int a, bool k) { return min(x, a, k).values; }},
      {"amax", [](const Tensor& x, int a, bool k) { return amax(x, a, k); }},
      {"amin", [](const Tensor& x, int a, bool k) { return amin(x, a, k); }}};
  for (const auto& [op, f] : ops) {
    for (const Along& a : kAlong)
      t.unary(op, a.name, a.shape, [f = f, a](const Tensor& x) { return f(x, a.axis, a.keepdim); });
    // Times x: the second derivative is not zero, and -inf entries that never win.
    t.unary(op, "times_x", {3, 4}, [f = f](const Tensor& x) { return mul(f(x, 1, true), x); });
    const bool largest = std::string(op) == "max" || std::string(op) == "amax";
    const double inf = largest ? -kInf : kInf;
    t.add_inputs(op, "losing_infinities",
                 {from_vector({inf, 0.5, -1, inf, 2, inf}, {2, 3}, Dtype::f64)},
                 one([f = f](const Tensor& x) { return f(x, 1, false); }));
  }
  // Ties of two: the gradient split half and half (the central difference's value too).
  for (const char* op : {"amax", "amin"}) {
    const bool largest = op[1] == 'm' && op[2] == 'a';
    auto f = [largest](const Tensor& x, int a) { return largest ? amax(x, a) : amin(x, a); };
    const double v = largest ? 2 : -2;
    t.add_inputs(op, "ties_of_two", {from_vector({v, 0.5, v, -1, 0.25, v, 0.75, v}, {2, 4}, Dtype::f64)},
                 one([f](const Tensor& x) { return f(x, 1); }));
    t.first_order_only();
    t.add_inputs(op, "ties_of_two_axis0", {from_vector({v, 0.5, v, 0.5, -1, 0.25}, {3, 2}, Dtype::f64)},
                 one([f](const Tensor& x) { return f(x, 0); }));
    t.first_order_only();
  }
}

void logsumexp_var_cases(Table& t) {
  for (const Along& a : kAlong) {
    t.unary("logsumexp", a.name, a.shape,
            [a](const Tensor& x) { return logsumexp(x, a.axis, a.keepdim); });
    if (a.shape[a.axis < 0 ? a.axis + a.shape.rank() : a.axis] > 1)  // else 0 / 0 (below)
      t.unary("var", a.name, a.shape, [a](const Tensor& x) { return var(x, a.axis, 1, a.keepdim); });
  }
  t.unary("logsumexp", "large", {3, 4}, [](const Tensor& x) { return logsumexp(scale(x, 300.0), 1); });
  t.add_inputs("logsumexp", "minus_inf_entries",
               {from_vector({-kInf, 0.5, -1, -kInf, 2, 0.25}, {2, 3}, Dtype::f64)},
               one([](const Tensor& x) { return logsumexp(x, 1); }));
  t.unary("logsumexp", "times_x", {3, 4}, [](const Tensor& x) { return mul(logsumexp(x, 0, true), x); });
  t.unary("var", "population", {3, 5}, [](const Tensor& x) { return var(x, 1, 0); });
  t.unary("var", "correction2", {2, 4, 3}, [](const Tensor& x) { return var(x, 1, 2, true); });
  t.unary("var", "correction0_axis_of_1", {3, 1}, [](const Tensor& x) { return add(var(x, 1, 0), x); });
  t.unary("var", "wide_range", {2, 5}, [](const Tensor& x) { return var(scale(x, 30.0), 1); });
}

}  // namespace

void reduction_op_cases(Table& t) {
  extreme_cases(t);
  logsumexp_var_cases(t);
  // Repeated indices: gather's gradient adds them up, scatter_add adds the sources.
  const Tensor i2 = from_indices({2, 0, 2, 1, 1, 1}, {2, 3});
  const Tensor i2_axis0 = from_indices({1, 0, 2, 0, 0, 2}, {2, 3});
  auto g = [](int axis, Tensor idx) {
    return [axis, idx](const Tensor& x) { return gather(x, axis, idx); };
  };
  t.unary("gather", "2d_last", {2, 3}, g(1, i2));
  t.unary("gather", "2d_axis0", {3, 3}, g(0, i2_axis0));
  t.unary("gather", "index_smaller", {3, 4}, g(-1, i2));
  t.unary("gather", "rank1", {4}, g(0, from_indices({3, 3, 0, 1, 2}, {5})));
  t.unary("gather", "1xN", {1, 5}, g(1, from_indices({4, 0, 0}, {1, 3})));
  t.unary("gather", "Nx1", {4, 1}, g(0, from_indices({3, 1, 1}, {3, 1})));
  t.unary("gather", "rank3", {2, 3, 2}, g(1, from_indices({0, 1, 2, 2, 1, 0, 0, 0}, {2, 2, 2})));
  t.unary("gather", "rank4", {2, 2, 3, 2}, g(2, from_indices({2, 0, 1, 1, 0, 2, 2, 2}, {2, 2, 1, 2})));
  t.unary("gather", "times_x", {2, 3}, [i2](const Tensor& x) { return mul(gather(x, 1, i2), x); });
  auto s = [](int axis, Tensor idx) {
    return [axis, idx](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{scatter_add(x[0], axis, idx, x[1])};
    };
  };
  t.add("scatter_add", "2d_last", {{2, 3}, {2, 3}}, s(1, i2));
  t.add("scatter_add", "2d_axis0", {{3, 3}, {2, 3}}, s(0, i2_axis0));
  t.add("scatter_add", "index_smaller", {{3, 4}, {2, 3}}, s(-1, i2));
  t.add("scatter_add", "rank3", {{2, 3, 2}, {2, 2, 2}}, s(1, from_indices({0, 1, 2, 2, 1, 0, 0, 0}, {2, 2, 2})));
  t.add("scatter_add", "rank4", {{2, 2, 3, 2}, {2, 2, 1, 2}},
        s(2, from_indices({2, 0, 1, 1, 0, 2, 2, 2}, {2, 2, 1, 2})));
  t.add("scatter_add", "times_src", {{2, 3}, {2, 3}}, [i2](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{mul(scatter_add(x[0], 1, i2, x[1]), x[0])};
  });
}

}  // namespace tg::detail
