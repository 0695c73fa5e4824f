#pragma once
// MaxPool2d and AvgPool2d, as torch.nn's (stride = kernel_size when not given, padding 0;
// AvgPool2d counts the padding, PyTorch's count_include_pad = true): the ops max_pool2d /
// avg_pool2d (ops/pool.h) on (N, C, H, W), no parameters.

#include <optional>

#include <tapegrad/nn/layer.h>
#include <tapegrad/ops/pool.h>

namespace tg::nn {

/// The window both pools slide: kernel, stride (the kernel's when not given) and padding.
class Pool2d : public Layer {
 public:
  explicit Pool2d(Int2 kernel_size, std::optional<Int2> stride = std::nullopt, Int2 padding = 0)
      : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {}

  Int2 kernel_size, stride, padding;
};

class MaxPool2d : public Pool2d {
 public:
  using Pool2d::Pool2d;
  /// Throws as max_pool2d (ShapeError for an input not of rank 4, ValueError for bad sizes).
  Tensor forward(const Tensor& x) const override {
    return max_pool2d(x, kernel_size, stride, padding);  // (N, C, H_out, W_out)
  }
};

class AvgPool2d : public Pool2d {
 public:
  using Pool2d::Pool2d;
  /// Throws as avg_pool2d.
  Tensor forward(const Tensor& x) const override {
    return avg_pool2d(x, kernel_size, stride, padding);  // (N, C, H_out, W_out)
  }
};

}  // namespace tg::nn
