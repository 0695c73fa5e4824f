// Op cases at ranks 5 and 6, the largest a tensor has (conv's and attention's intermediates):
// broadcasting that leaves every kind of axis (broadcast, size 1, merged with its neighbour),
// sums and means over scattered axes, permutes that move every axis, reshapes to and from rank
// 6, broadcast_to, sum_to, narrow, cat, pad, gather, softmax, squeeze / unsqueeze and batched
// matmul with a broadcast batch of four axes. The shapes stay small (at most 64 elements), so
// gradgradcheck's finite differences over every entry are quick.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

void elementwise_rank_cases(Table& t) {
  const std::pair<const char*, Fn2> ops[] = {{"add", [](auto& a, auto& b) { return add(a, b); }},
                                             {"sub", [](auto& a, auto& b) { return sub(a, b); }},
                                             {"mul", [](auto& a, auto& b) { return mul(a, b); }}};
  for (const auto& [op, f] : ops) {
    t.binary(op, "rank5_broadcast_both", {2, 1, 2, 1, 2}, {2, 1, 2, 1}, f);
    t.binary(op, "rank6_broadcast_both", {1, 2, 1, 2, 1, 2}, {2, 1, 2, 1, 2, 1}, f);
    t.binary(op, "rank6_second_constant_along_rows", {2, 1, 1, 2, 3, 2}, {2, 1, 1, 1, 1}, f);
  }
  t.binary("div", "rank6_broadcast_first", {2, 1, 3}, {2, 1, 2, 2, 1, 3},
           [](const Tensor& a, const Tensor& b) { return div(a, add(mul(b, b), 1.0)); });
}

void reduction_rank_cases(Table& t) {
  for (const char* op : {"sum_dims", "mean_dims"}) {
    const bool is_mean = op[0] == 'm';
    auto f = [is_mean](std::vector<int> dims, bool keepdim) {
      return [=](const Tensor& x) { return is_mean ? mean(x, dims, keepdim) : sum(x, dims, keepdim); };
    };
    t.unary(op, "rank5_1_3", {2, 3, 2, 2, 2}, f({1, 3}, false));
    t.unary(op, "rank6_0_2_5_keepdim", {2, 1, 3, 2, 1, 2}, f({0, 2, -1}, true));
    t.unary(op, "rank6_all_but_one", {2, 2, 1, 2, 2, 2}, f({0, 1, 2, 4, 5}, false));
  }
  t.unary("sum", "rank6_axis_minus4_keepdim", {2, 1, 3, 2, 1, 2},
          [](const Tensor& x) { return sum(x, -4, true); });
  t.unary("mean", "rank5_axis2", {2, 1, 3, 2, 2}, [](const Tensor& x) { return mean(x, 2); });
  auto sto = [](Shape s) { return [s](const Tensor& x) { return sum_to(x, s); }; };
  t.unary("sum_to", "rank6_scattered", {2, 2, 1, 2, 3, 2}, sto({2, 1, 1, 3, 1}));
  t.unary("sum_to", "rank5_to_rank2", {2, 2, 2, 3, 2}, sto({3, 1}));
  t.unary("softmax", "rank6", {2, 1, 2, 1, 2, 3}, [](const Tensor& x) { return softmax(x); });
  t.unary("softmax_dim", "rank5_dim1", {2, 3, 1, 2, 2}, [](const Tensor& x) { return softmax(x, 1); });
}

void shape_rank_cases(Table& t) {
  auto perm = [](std::vector<int> p) { return [p](const Tensor& x) { return permute(x, p); }; };
  t.unary("permute", "rank5", {2, 3, 1, 2, 2}, perm({4, 2, 0, 3, 1}));
  t.unary("permute", "rank6_reversed", {2, 1, 2, 3, 1, 2}, perm({5, 4, 3, 2, 1, 0}));
  t.unary("permute", "rank6_pairs_swapped", {2, 2, 1, 3, 2, 1}, perm({1, 0, 3, 2, 5, 4}));
  t.unary("transpose", "rank6", {1, 2, 1, 2, 3, 2}, [](const Tensor& x) { return transpose(x); });
  t.unary("transpose_dims", "rank6_0_4", {2, 1, 2, 1, 3, 2},
          [](const Tensor& x) { return transpose(x, 0, 4); });
  auto resh = [](std::vector<int64_t> s) { return [s](const Tensor& x) { return reshape(x, s); }; };
  t.unary("reshape", "rank2_to_rank6", {4, 6}, resh({2, 1, 2, 3, -1, 2}));
  t.unary("reshape", "rank6_to_rank3", {2, 1, 2, 3, 1, 2}, resh({2, -1, 3}));
  auto bto = [](Shape s) { return [s](const Tensor& x) { return broadcast_to(x, s); }; };
  t.unary("broadcast_to", "rank5_scattered", {2, 1, 3, 1}, bto({2, 2, 1, 3, 2}));
  t.unary("broadcast_to", "to_rank6", {1, 2, 1}, bto({2, 1, 2, 2, 2, 3}));
  auto times_x = [](std::function<Tensor(const Tensor&)> f, std::vector<int64_t> back) {
    return [f, back](const Tensor& x) { return mul(f(x), reshape(x, back)); };
  };
  t.unary("squeeze", "rank6_all", {1, 3, 1, 2, 1, 2},
          times_x([](const Tensor& x) { return squeeze(x); }, {3, 2, 2}));
  t.unary("unsqueeze", "rank5_to_6", {2, 1, 3, 1, 2},
          times_x([](const Tensor& x) { return unsqueeze(x, 3); }, {2, 1, 3, 1, 1, 2}));
}

void index_rank_cases(Table& t) {
  auto nar = [](int axis, int64_t start, int64_t length) {
    return [=](const Tensor& x) { return narrow(x, axis, start, length); };
  };
  t.unary("narrow", "rank6_axis2", {2, 1, 3, 2, 1, 2}, nar(2, 1, 2));
  t.unary("narrow", "rank5_axis_minus1", {2, 2, 1, 2, 3}, nar(-1, 0, 2));
  t.add("cat", "rank6_axis3", {{1, 2, 1, 1, 2, 2}, {1, 2, 1, 2, 2, 2}},
        [](const std::vector<Tensor>& x) { return std::vector<Tensor>{cat(x, 3)}; });
  t.add("cat", "rank5_axis0", {{1, 2, 1, 2, 2}, {2, 2, 1, 2, 2}},
        [](const std::vector<Tensor>& x) { return std::vector<Tensor>{cat(x, 0)}; });
  t.unary("pad", "rank6_three_axes", {2, 1, 2, 1, 2, 2},
          [](const Tensor& x) { return pad(x, {1, 0, -1, 1, 0, 2}, 0.5); });
  const Tensor idx = from_indices({1, 0, 2, 2, 0, 1, 1, 1}, {2, 1, 1, 2, 1, 2});
  t.unary("gather", "rank6_axis3", {2, 1, 1, 3, 1, 2},
          [idx](const Tensor& x) { return gather(x, 3, idx); });
}

void matmul_rank_cases(Table& t) {
  auto mm = [](bool ta, bool tb) {
    return [ta, tb](const Tensor& a, const Tensor& b) { return matmul(a, b, ta, tb); };
  };
  t.binary("matmul", "rank6_broadcast_batch", {2, 1, 2, 1, 2, 3}, {2, 1, 1, 3, 2}, mm(false, false));
  t.binary("matmul", "rank5_transposed", {2, 1, 2, 3, 2}, {1, 2, 2, 2, 3}, mm(true, true));
  t.binary("matmul", "rank6_at_rank2", {1, 2, 1, 2, 2, 3}, {3, 2}, mm(false, false));
}

}  // namespace

void rank_op_cases(Table& t) {
  elementwise_rank_cases(t);
  reduction_rank_cases(t);
  shape_rank_cases(t);
  index_rank_cases(t);
  matmul_rank_cases(t);
}

}  // namespace tg::detail
