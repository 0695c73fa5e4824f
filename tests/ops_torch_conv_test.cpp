// Convolution, pooling, batch_norm and group_norm against PyTorch itself (tests/ops_reference.py), by the shared runner
// (tests/ops_torch_util.h): several inputs (X, W, b), each compared in its output, its gradient
// of sum(y * w), the second derivative (through create_graph) and the float32 forward.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <tapegrad/ops/ops.h>
#include "ops_torch_util.h"

namespace {

using tg::Tensor;
using tg::test::MultiCase;

std::string pair(tg::Int2 v) { return std::to_string(v.h) + "," + std::to_string(v.w); }

// A number as ops_reference.py reads it back exactly ("0.3333333333333333", not "0.333333").
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// batch_norm (running stats linspace(-0.5, 0.5, C) and linspace(0.5, 1.5, C), as
// ops_reference.py makes them) and group_norm, with and without weight and bias.
void norm_cases(std::vector<MultiCase>& c) {
  struct Norm {
    tg::Shape x;
    bool affine, training;
    double momentum, eps;
  };
  const std::vector<Norm> bn = {
      {{4, 3}, true, true, 0.1, 1e-5},        {{2, 3, 5}, true, true, 0.3, 1e-5},
      {{2, 2, 3, 4}, true, true, 0.1, 1e-3},  {{3, 2, 2, 2}, false, true, 0.1, 1e-5},
      {{1, 2, 6}, true, true, 0.1, 1e-5},     {{4, 3}, true, false, 0.1, 1e-5},
      {{2, 3, 2, 2}, true, false, 0.1, 1e-5}, {{2, 2, 3}, false, false, 0.1, 1e-2},
  };
  for (const Norm& k : bn) {
    std::vector<tg::Shape> shapes{k.x};
    if (k.affine) shapes.insert(shapes.end(), {{k.x[1]}, {k.x[1]}});
    c.push_back({"batch_norm training=" + std::to_string(k.training) + " momentum=" +
                     num(k.momentum) + " eps=" + num(k.eps),
                 shapes, [k](const std::vector<Tensor>& in) {
                   const int64_t C = in[0].size(1);
                   const Tensor rm = tg::linspace(-0.5, 0.5, C, in[0].dtype());
                   const Tensor rv = tg::linspace(0.5, 1.5, C, in[0].dtype());
                   const Tensor w = in.size() > 1 ? in[1] : Tensor(), b = in.size() > 1 ? in[2] : Tensor();
                   return tg::batch_norm(in[0], rm, rv, w, b, k.training, k.momentum, k.eps);
                 }});
  }
  struct Group {
    tg::Shape x;
    int64_t groups;
    bool affine;
    double eps;
  };
  const std::vector<Group> gn = {
      {{3, 4}, 2, true, 1e-5},       {{2, 6, 5}, 3, true, 1e-5}, {{2, 4, 3, 3}, 2, true, 1e-3},
      {{2, 3, 4}, 1, true, 1e-5},    {{2, 3, 4}, 3, true, 1e-5}, {{1, 4, 2, 3}, 4, false, 1e-5},
  };
  for (const Group& k : gn) {
    std::vector<tg::Shape> shapes{k.x};
    if (k.affine) shapes.insert(shapes.end(), {{k.x[1]}, {k.x[1]}});
    c.push_back({"group_norm groups=" + std::to_string(k.groups) + " eps=" + num(k.eps), shapes,
                 [k](const std::vector<Tensor>& in) {
                   const Tensor w = in.size() > 1 ? in[1] : Tensor(), b = in.size() > 1 ? in[2] : Tensor();
                   return tg::group_norm(in[0], k.groups, w, b, k.eps);
                 }});
  }
}

std::vector<MultiCase> conv_cases() {
  std::vector<MultiCase> c;
  struct Conv {
    tg::Shape x, w;
    bool bias;
    tg::Int2 stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Conv> conv2d = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, true, 1, 0, 1, 1},
      {{1, 2, 5, 5}, {3, 2, 1, 1}, false, 1, 0, 1, 1},
      {{2, 2, 7, 6}, {3, 2, 1, 1}, true, 2, 1, 1, 1},
      {{1, 2, 8, 7}, {2, 2, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}, 1},
      {{2, 4, 5, 5}, {6, 2, 2, 3}, true, 1, {0, 1}, 1, 2},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, true, 2, 1, 1, 3},
      {{2, 3, 5, 4}, {6, 1, 3, 2}, false, {1, 2}, 2, {2, 1}, 3},
      {{1, 1, 7, 5}, {2, 1, 3, 3}, true, 3, 2, 1, 1},
      {{1, 2, 3, 3}, {2, 2, 5, 5}, true, 1, 1, 1, 1},
  };
  auto add_conv2d = [&c](const Conv& k) {
    std::vector<tg::Shape> shapes{k.x, k.w};
    if (k.bias) shapes.push_back({k.w[0]});
    c.push_back({"conv2d stride=" + pair(k.stride) + " padding=" + pair(k.padding) +
                     " dilation=" + pair(k.dilation) + " groups=" + std::to_string(k.groups),
                 shapes, [k](const std::vector<Tensor>& in) {
                   return tg::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), k.stride,
                                     k.padding, k.dilation, k.groups);
                 }});
  };
  for (const Conv& k : conv2d) add_conv2d(k);
  struct Conv1 {
    tg::Shape x, w;
    bool bias;
    int64_t stride, padding, dilation, groups;
  };
  const std::vector<Conv1> conv1d = {
      {{2, 3, 9}, {4, 3, 3}, true, 1, 0, 1, 1},     {{1, 2, 6}, {3, 2, 1}, false, 1, 0, 1, 1},
      {{2, 2, 11}, {3, 2, 3}, true, 2, 1, 2, 1},    {{2, 4, 7}, {2, 2, 2}, true, 1, 1, 1, 2},
      {{1, 3, 8}, {6, 1, 3}, true, 3, 2, 1, 3},
  };
  for (const Conv1& k : conv1d) {
    std::vector<tg::Shape> shapes{k.x, k.w};
    if (k.bias) shapes.push_back({k.w[0]});
    c.push_back({"conv1d stride=" + std::to_string(k.stride) + " padding=" +
                     std::to_string(k.padding) + " dilation=" + std::to_string(k.dilation) +
                     " groups=" + std::to_string(k.groups),
                 shapes, [k](const std::vector<Tensor>& in) {
                   return tg::conv1d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), k.stride,
                                     k.padding, k.dilation, k.groups);
                 }});
  }
  struct Pool {
    tg::Shape x;
    tg::Int2 kernel, stride, padding;
    bool ties;
  };
  const std::vector<Pool> pool2d = {
      {{2, 2, 4, 4}, 2, 2, 0, false},          {{1, 2, 5, 5}, 3, 2, 1, false},
      {{1, 1, 4, 7}, {2, 3}, {1, 2}, {1, 1}, false}, {{2, 1, 5, 7}, 2, 2, 0, false},
      {{2, 3, 6, 6}, 2, 2, 0, true},           {{1, 2, 6, 5}, 3, 1, 1, true},
  };
  for (const char* name : {"max_pool2d", "avg_pool2d"})
    for (const Pool& k : pool2d) {
      const bool is_max = name[0] == 'm';
      c.push_back({std::string(name) + " kernel=" + pair(k.kernel) + " stride=" + pair(k.stride) +
                       " padding=" + pair(k.padding),
                   {k.x}, [k, is_max](const std::vector<Tensor>& in) {
                     return is_max ? tg::max_pool2d(in[0], k.kernel, k.stride, k.padding)
                                   : tg::avg_pool2d(in[0], k.kernel, k.stride, k.padding);
                   },
                   k.ties});
    }
  struct Pool1 {
    tg::Shape x;
    int64_t kernel, stride, padding;
    bool ties;
  };
  const std::vector<Pool1> pool1d = {
      {{2, 3, 8}, 2, 2, 0, false}, {{1, 2, 9}, 3, 2, 1, false}, {{2, 1, 7}, 2, 3, 0, false},
      {{2, 2, 10}, 3, 1, 1, true}};
  for (const char* name : {"max_pool1d", "avg_pool1d"})
    for (const Pool1& k : pool1d) {
      const bool is_max = name[0] == 'm';
      c.push_back({std::string(name) + " kernel=" + std::to_string(k.kernel) + " stride=" +
                       std::to_string(k.stride) + " padding=" + std::to_string(k.padding),
                   {k.x}, [k, is_max](const std::vector<Tensor>& in) {
                     return is_max ? tg::max_pool1d(in[0], k.kernel, k.stride, k.padding)
                                   : tg::avg_pool1d(in[0], k.kernel, k.stride, k.padding);
                   },
                   k.ties});
    }
  norm_cases(c);
  // 3 x 3 at stride 1 over 8 or more channels a group: Winograd's kernels (ops/winograd.h): even
  // and odd outputs, padding, groups, and planes large enough for several chunks of images on
  // several threads; without padding and with an even output (6 x 6, 10 x 8, and in groups) the
  // transforms read and fold the planes in place. (Last, so the cases above keep the inputs they
  // were drawn.)
  for (const Conv& k : std::vector<Conv>{{{2, 8, 6, 6}, {3, 8, 3, 3}, true, 1, 1, 1, 1},
                                         {{1, 16, 5, 7}, {4, 8, 3, 3}, true, 1, {2, 1}, 1, 2},
                                         {{3, 8, 9, 4}, {2, 8, 3, 3}, false, 1, 0, 1, 1},
                                         {{3, 8, 40, 40}, {2, 8, 3, 3}, true, 1, 1, 1, 1},
                                         {{2, 8, 6, 6}, {3, 8, 3, 3}, true, 1, 0, 1, 1},
                                         {{2, 8, 10, 8}, {2, 8, 3, 3}, false, 1, 0, 1, 1},
                                         {{1, 16, 6, 8}, {4, 8, 3, 3}, true, 1, 0, 1, 2}})
    add_conv2d(k);
  // At most 27 taps an output at stride 1: the direct forward (ops/conv_direct.h): rows of whole
  // blocks and a last block overlapping the one before (W_out 26, 19 and 20), a row of exactly
  // one float block (W_out 16), padding, groups of 4 output channels, and output channels past
  // the blocks of 4 with AVX2 (6, 5 and 3). Then, for AVX-512's blocks of 8 channels by 2 rows,
  // channels left over (11 = 8 + 2 + 1; 9 a group) and an odd row left over (H_out 11 and 5).
  for (const Conv& k : std::vector<Conv>{{{2, 1, 28, 28}, {6, 1, 3, 3}, true, 1, 0, 1, 1},
                                         {{1, 3, 12, 19}, {5, 3, 3, 3}, true, 1, 1, 1, 1},
                                         {{2, 4, 9, 18}, {8, 2, 2, 3}, false, 1, {1, 2}, 1, 2},
                                         {{1, 2, 6, 18}, {3, 2, 3, 3}, true, 1, 0, 1, 1},
                                         {{2, 1, 13, 20}, {11, 1, 3, 3}, true, 1, 0, 1, 1},
                                         {{1, 2, 7, 18}, {18, 1, 3, 3}, true, 1, 0, 1, 2}})
    add_conv2d(k);
  // Winograd's products by the panel kernel (ops/panel_kernel.h; panels of 32 floats or 16
  // doubles with AVX-512, 16 or 8 with AVX2): 32 input channels (whole panels of dU's columns),
  // 11 output channels (a tile of 8 rows, 4 with AVX2, and rows left over), 50 tiles (whole
  // panels and columns left over for gemm).
  add_conv2d({{2, 32, 10, 10}, {11, 32, 3, 3}, true, 1, 1, 1, 1});
  // 40 input channels: dU's whole panels and columns left over for gemm (in double, which the
  // gradients are compared in: 2 panels of 16 and 8 columns with AVX-512); and the direct
  // forward's 8-channel blocks over a padded input.
  add_conv2d({{1, 40, 6, 6}, {3, 40, 3, 3}, false, 1, 0, 1, 1});
  add_conv2d({{1, 1, 9, 20}, {8, 1, 3, 3}, true, 1, 1, 1, 1});
  return c;
}

TEST(OpsTorch, ConvPoolAndNormsMatchPyTorch) {
  tg::test::run_multi_cases(conv_cases(), 2027, TAPEGRAD_OPS_REFERENCE_PY);
}

}  // namespace
