// Op cases for the shape ops of PyTorch's functional API: stack, chunk, squeeze, unsqueeze,
// flatten, expand, pad (positive, negative and mixed pads, a fill value) and index_select
// (repeated indices, whose gradients add up).

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
Function out(Fn f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x)}; };
}

void join_cut_cases(Table& t) {
  auto st = [](int axis) { return out([axis](const std::vector<Tensor>& x) { return stack(x, axis); }); };
  t.add("stack", "two_2d_axis0", {{2, 3}, {2, 3}}, st(0));
  t.add("stack", "three_2d_last", {{2, 3}, {2, 3}, {2, 3}}, st(-1));
  t.add("stack", "1xN_axis1", {{1, 4}, {1, 4}}, st(1));
  t.add("stack", "Nx1_axis2", {{3, 1}, {3, 1}}, st(2));
  t.add("stack", "rank0", {{}, {}, {}}, st(0));
  t.add("stack", "rank3_axis_minus2", {{2, 1, 3}, {2, 1, 3}}, st(-2));
  t.add("stack", "one", {{2, 2}}, st(1));
  t.add("stack", "same_input_twice", {{2, 3}}, out([](const std::vector<Tensor>& x) {
          return stack({x[0], mul(x[0], x[0])}, 1);
        }));
  auto ch = [](int64_t n, int axis, std::size_t piece) {
    return [n, axis, piece](const Tensor& x) { return mul(chunk(x, n, axis)[piece], chunk(x, n, axis)[0]); };
  };
  t.unary("chunk", "even", {4, 3}, ch(2, 0, 1));
  t.unary("chunk", "uneven_last", {2, 5}, [](const Tensor& x) {
    const auto c = chunk(x, 3, -1);  // pieces of 2, 2, 1
    return cat({mul(c[0], c[1]), c[2]}, -1);
  });
  t.unary("chunk", "fewer_than_asked", {6, 2}, [](const Tensor& x) {
    const auto c = chunk(x, 4, 0);  // pieces of 2: three of them
    return stack({c[0], c[1], mul(c[2], c[2])}, 0);
  });
  t.unary("chunk", "rank3_axis1", {2, 4, 3}, ch(2, 1, 1));
  t.unary("chunk", "1xN", {1, 6}, ch(3, 1, 2));
}

void view_cases(Table& t) {
  auto times_x = [](std::function<Tensor(const Tensor&)> f, std::vector<int64_t> back) {
    return [f, back](const Tensor& x) { return mul(f(x), reshape(x, back)); };
  };
  t.unary("squeeze", "axis1", {3, 1, 2}, times_x([](const Tensor& x) { return squeeze(x, 1); }, {3, 2}));
  t.unary("squeeze", "axis_not_1", {3, 2}, times_x([](const Tensor& x) { return squeeze(x, 0); }, {3, 2}));
  t.unary("squeeze", "all", {1, 3, 1, 2}, times_x([](const Tensor& x) { return squeeze(x); }, {3, 2}));
  t.unary("squeeze", "Nx1_last", {4, 1}, times_x([](const Tensor& x) { return squeeze(x, -1); }, {4}));
  t.unary("unsqueeze", "front", {2, 3}, times_x([](const Tensor& x) { return unsqueeze(x, 0); }, {1, 2, 3}));
  t.unary("unsqueeze", "end", {2, 3}, times_x([](const Tensor& x) { return unsqueeze(x, -1); }, {2, 3, 1}));
  t.unary("unsqueeze", "rank0", {}, times_x([](const Tensor& x) { return unsqueeze(x, 0); }, {1}));
  t.unary("unsqueeze", "rank3_to_4", {2, 1, 3}, times_x([](const Tensor& x) { return unsqueeze(x, 2); }, {2, 1, 1, 3}));
  t.unary("flatten", "all", {2, 3, 2}, times_x([](const Tensor& x) { return flatten(x); }, {12}));
  t.unary("flatten", "from_1", {2, 3, 2}, times_x([](const Tensor& x) { return flatten(x, 1); }, {2, 6}));
  t.unary("flatten", "middle", {2, 3, 2, 2}, times_x([](const Tensor& x) { return flatten(x, 1, -2); }, {2, 6, 2}));
  t.unary("flatten", "rank0", {}, times_x([](const Tensor& x) { return flatten(x); }, {1}));
  t.unary("flatten", "1xN", {1, 5}, times_x([](const Tensor& x) { return flatten(x); }, {5}));
  auto ex = [](std::vector<int64_t> s) { return [s](const Tensor& x) { return expand(x, s); }; };
  t.unary("expand", "row", {3}, ex({2, 3}));
  t.unary("expand", "keep_with_minus1", {2, 1}, ex({-1, 4}));
  t.unary("expand", "new_leading", {1, 3}, ex({2, 2, -1}));
  t.unary("expand", "rank4", {2, 1, 3, 1}, ex({2, 2, -1, 2}));
  t.unary("expand", "scalar", {}, ex({2, 3}));
}

}  // namespace

void shape_op_cases(Table& t) {
  join_cut_cases(t);
  view_cases(t);
  auto pd = [](std::vector<int64_t> p, double v) { return [p, v](const Tensor& x) { return pad(x, p, v); }; };
  t.unary("pad", "last_axis", {2, 3}, pd({1, 2}, 0));
  t.unary("pad", "two_axes_value", {2, 3}, pd({1, 0, 2, 1}, 1.5));
  t.unary("pad", "negative_crops", {3, 4}, pd({-1, 1, 1, -2}, 0));
  t.unary("pad", "rank1", {4}, pd({0, 3}, -2));
  t.unary("pad", "1xN", {1, 5}, pd({2, 2}, 0));
  t.unary("pad", "Nx1", {4, 1}, pd({1, 1, 0, 1}, 0));
  t.unary("pad", "rank4_three_axes", {2, 1, 2, 3}, pd({1, 0, 0, 2, 1, 1}, 0.25));
  t.unary("pad", "none", {2, 2}, pd({}, 0));
  t.unary("pad", "times_x", {2, 3}, [](const Tensor& x) { return mul(pad(x, {1, -1}), x); });
  auto is = [](int axis, Tensor idx) { return [axis, idx](const Tensor& x) { return index_select(x, axis, idx); }; };
  t.unary("index_select", "rows_repeated", {3, 2}, is(0, from_indices({2, 0, 2, 2}, {4})));
  t.unary("index_select", "last_axis", {2, 4}, is(-1, from_indices({3, 1}, {2})));
  t.unary("index_select", "rank0_index", {2, 3}, is(1, from_indices({1}, {})));
  t.unary("index_select", "rank1", {5}, is(0, from_indices({4, 4, 0}, {3})));
  t.unary("index_select", "1xN", {1, 4}, is(1, from_indices({0, 3, 3}, {3})));
  t.unary("index_select", "rank3_middle", {2, 3, 2}, is(1, from_indices({2, 0}, {2})));
  t.unary("index_select", "rank4", {2, 3, 2, 2}, is(-3, from_indices({1, 1, 2}, {3})));
  t.unary("index_select", "times_x", {2, 3}, [](const Tensor& x) {
    return mul(index_select(x, 1, from_indices({2, 1, 0}, {3})), x);
  });
}

}  // namespace tg::detail
