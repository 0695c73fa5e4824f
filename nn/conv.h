#pragma once
// Conv1d and Conv2d, as torch.nn's: weight (C_out, C_in / groups, k...) and bias (C_out), the
// ops conv1d / conv2d (ops/conv.h) underneath. Init as PyTorch's reset_parameters:
//   weight ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
//   bias   ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),  fan_in = C_in / groups * prod(k)
// drawn from the Rng in that order, row-major.

#include <cstdint>
#include <string>

#include <tapegrad/nn/layer.h>
#include <tapegrad/ops/conv.h>

namespace tg::nn {

/// Conv2d's arguments after the sizes, PyTorch's defaults.
struct Conv2dOptions {
  Int2 stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

/// Conv1d's arguments after the sizes, PyTorch's defaults.
struct Conv1dOptions {
  int64_t stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Layer {
 public:
  /// Throws ValueError for sizes below 1, groups not dividing both channel counts, or an int64
  /// dtype.
  Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, Rng& rng,
         const Conv2dOptions& options = {}, Dtype dtype = get_default_dtype());
  /// x (N, C_in, H, W) -> (N, C_out, H_out, W_out). Throws ShapeError naming the layer when x
  /// is not of rank 4 with C_in channels, else as conv2d.
  Tensor forward(const Tensor& x) const override;
  /// "Conv2d(1, 32, (3, 3))", for messages.
  std::string name() const;

  int64_t in_channels, out_channels;
  Int2 kernel_size;
  Conv2dOptions options;
  Tensor weight;  // (C_out, C_in / groups, kH, kW)
  Tensor bias;    // (C_out), undefined without bias
};

class Conv1d : public Layer {
 public:
  /// Throws as Conv2d's constructor.
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Rng& rng,
         const Conv1dOptions& options = {}, Dtype dtype = get_default_dtype());
  /// x (N, C_in, L) -> (N, C_out, L_out). Throws ShapeError naming the layer when x is not of
  /// rank 3 with C_in channels, else as conv1d.
  Tensor forward(const Tensor& x) const override;
  std::string name() const;

  int64_t in_channels, out_channels, kernel_size;
  Conv1dOptions options;
  Tensor weight;  // (C_out, C_in / groups, k)
  Tensor bias;    // (C_out), undefined without bias
};

}  // namespace tg::nn
