// Op cases for conv2d, conv1d, max_pool2d, avg_pool2d, max_pool1d, avg_pool1d: 1x1 kernels,
// non-square kernels, strides, padding, dilation, groups (and depthwise, groups = C_in), batch 1,
// odd sizes that the output-size rule rounds down, and ties for max pooling. Outputs stay small:
// every output entry costs gradcheck one backward.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

struct Conv2dArgs {
  Int2 stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
};

void conv2d_cases(Table& t) {
  // Inputs X, W and, when `bias`, b (C_out).
  auto conv = [&t](const std::string& name, Shape x, Shape w, bool bias, Conv2dArgs a) {
    std::vector<Shape> shapes{x, w};
    if (bias) shapes.push_back({w[0]});
    t.add("conv2d", name, shapes, [a](const std::vector<Tensor>& in) {
      const Tensor b = in.size() > 2 ? in[2] : Tensor();
      return std::vector<Tensor>{conv2d(in[0], in[1], b, a.stride, a.padding, a.dilation, a.groups)};
    });
  };
  conv("basic_3x3", {2, 3, 5, 5}, {4, 3, 3, 3}, true, {});
  conv("no_bias", {1, 2, 5, 4}, {3, 2, 2, 3}, false, {});
  conv("1x1", {2, 3, 4, 4}, {2, 3, 1, 1}, true, {});
  conv("1x1_stride2", {1, 2, 5, 5}, {3, 2, 1, 1}, true, {.stride = 2});
  conv("non_square_stride_padding_pairs", {1, 2, 6, 5}, {2, 2, 3, 2}, true,
       {.stride = {2, 1}, .padding = {1, 0}});
  conv("dilation_padding", {1, 2, 7, 6}, {2, 2, 2, 3}, true,
       {.padding = 1, .dilation = {2, 1}});
  conv("groups2", {2, 4, 4, 4}, {4, 2, 2, 2}, true, {.groups = 2});
  conv("depthwise_multiplier2", {1, 3, 5, 5}, {6, 1, 3, 3}, true,
       {.stride = 2, .padding = 1, .groups = 3});
  conv("depthwise", {2, 2, 4, 3}, {2, 1, 2, 2}, false, {.groups = 2});
  conv("batch1_odd_stride3_padding2", {1, 1, 7, 5}, {1, 1, 3, 3}, true,
       {.stride = 3, .padding = 2});
  conv("kernel_fills_padded_input", {1, 2, 3, 3}, {2, 2, 5, 5}, true, {.padding = 1});
  conv("everything", {2, 4, 6, 7}, {2, 2, 3, 2}, true,
       {.stride = {2, 3}, .padding = {2, 1}, .dilation = {1, 2}, .groups = 2});
  // 3 x 3 at stride 1 over 8 or more channels a group: Winograd's kernels (ops/winograd.h)
  conv("winograd_padding1", {2, 8, 4, 4}, {2, 8, 3, 3}, true, {.padding = 1});
  conv("winograd_odd_groups2", {1, 16, 5, 4}, {4, 8, 3, 3}, false, {.padding = {1, 0}, .groups = 2});
}

void conv1d_cases(Table& t) {
  struct A {
    int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  };
  auto conv = [&t](const std::string& name, Shape x, Shape w, bool bias, A a) {
    std::vector<Shape> shapes{x, w};
    if (bias) shapes.push_back({w[0]});
    t.add("conv1d", name, shapes, [a](const std::vector<Tensor>& in) {
      const Tensor b = in.size() > 2 ? in[2] : Tensor();
      return std::vector<Tensor>{conv1d(in[0], in[1], b, a.stride, a.padding, a.dilation, a.groups)};
    });
  };
  conv("basic", {2, 3, 7}, {4, 3, 3}, true, {});
  conv("no_bias_1x1", {2, 3, 5}, {2, 3, 1}, false, {});
  conv("stride2_padding1_dilation2", {1, 2, 9}, {3, 2, 3}, true,
       {.stride = 2, .padding = 1, .dilation = 2});
  conv("groups2", {2, 4, 6}, {2, 2, 2}, true, {.groups = 2});
  conv("depthwise", {1, 3, 8}, {3, 1, 3}, true, {.stride = 3, .padding = 2, .groups = 3});
  conv("batch1_odd", {1, 1, 5}, {2, 1, 4}, true, {.stride = 2});
}

// x (R, Cc) with each entry repeated twice along the last axis: (N, C, H, 2 Cc / ...) planes of
// pairs that stay tied whatever gradcheck's steps do to x.
Tensor pairs_tied(const Tensor& x, const Shape& plane) {
  const Tensor col = reshape(x, {x.numel(), 1});
  return reshape(broadcast_to(col, {x.numel(), 2}), plane.vec());
}

void pool2d_cases(Table& t) {
  for (const char* op : {"max_pool2d", "avg_pool2d"}) {
    const bool is_max = op[0] == 'm';
    auto pool = [is_max](Int2 k, Int2 s, Int2 p) {
      return [=](const Tensor& x) { return is_max ? max_pool2d(x, k, s, p) : avg_pool2d(x, k, s, p); };
    };
    t.unary(op, "kernel2_default_stride", {2, 2, 4, 4},
            [is_max](const Tensor& x) { return is_max ? max_pool2d(x, 2) : avg_pool2d(x, 2); });
    t.unary(op, "kernel3_stride2_padding1", {1, 2, 5, 5}, pool(3, 2, 1));
    t.unary(op, "non_square", {1, 1, 4, 6}, pool({2, 3}, {1, 2}, {1, 1}));
    t.unary(op, "odd_sizes_round_down", {1, 2, 5, 7}, pool(2, 2, 0));
    t.unary(op, "kernel1", {2, 1, 3, 2}, pool(1, 1, 0));
    t.unary(op, "overlapping_batch1", {1, 3, 4, 3}, pool({2, 2}, {1, 1}, {0, 1}));
  }
  // Pairs of equal entries side by side, in windows that hold both: the gradient goes to one of
  // the two (the first), not to both.
  t.unary("max_pool2d", "ties", {8, 2}, [](const Tensor& x) {
    return max_pool2d(pairs_tied(x, {1, 1, 4, 8}), 2);
  });
  t.unary("max_pool2d", "ties_overlapping", {6, 2}, [](const Tensor& x) {
    return max_pool2d(pairs_tied(x, {1, 2, 3, 4}), {2, 3}, 1, {1, 1});
  });
}

void pool1d_cases(Table& t) {
  for (const char* op : {"max_pool1d", "avg_pool1d"}) {
    const bool is_max = op[0] == 'm';
    auto pool = [is_max](int64_t k, int64_t s, int64_t p) {
      return [=](const Tensor& x) { return is_max ? max_pool1d(x, k, s, p) : avg_pool1d(x, k, s, p); };
    };
    t.unary(op, "kernel2_default_stride", {2, 3, 6},
            [is_max](const Tensor& x) { return is_max ? max_pool1d(x, 2) : avg_pool1d(x, 2); });
    t.unary(op, "kernel3_stride2_padding1", {1, 2, 7}, pool(3, 2, 1));
    t.unary(op, "odd_round_down", {2, 1, 7}, pool(2, 3, 0));
    t.unary(op, "kernel1", {1, 2, 3}, pool(1, 1, 0));
  }
  t.unary("max_pool1d", "ties", {6, 1}, [](const Tensor& x) {
    return max_pool1d(pairs_tied(x, {2, 1, 6}), 2, 1, 1);
  });
}

}  // namespace

void conv_op_cases(Table& t) {
  conv2d_cases(t);
  conv1d_cases(t);
  pool2d_cases(t);
  pool1d_cases(t);
}

}  // namespace tg::detail
