#pragma once
// Conv1d and Conv2d, as torch.nn's: weight (C_out, C_in / groups, k...) and bias (C_out), the
// ops conv1d / conv2d (ops/conv.h) underneath. Init as PyTorch's reset_parameters:
//   weight ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in))
//   bias   ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),  fan_in = C_in / groups * prod(k)
// drawn from the Rng in that order, row-major.

#include <cstdint>
#include <string>
#include <vector>

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

/// What Conv1d and Conv2d share: the channels, the weight and bias with PyTorch's init, and
/// the check of an input's rank and channels.
class ConvLayer : public Layer {
 public:
  /// "Conv2d(1, 32, (3, 3))", for messages.
  const std::string& name() const { return name_; }

  int64_t in_channels, out_channels;
  Tensor weight;  // (C_out, C_in / groups, k...)
  Tensor bias;    // (C_out), undefined without bias

 protected:
  /// Throws ValueError for sizes below 1, groups not dividing both channel counts, or an int64
  /// dtype.
  ConvLayer(std::string name, int64_t in, int64_t out, const std::vector<int64_t>& kernel,
            int64_t groups, bool bias, Rng& rng, Dtype dtype);
  /// Throws ShapeError naming the layer unless x is (N, C_in, ...) of `rank` axes (`layout`).
  void check_input(const Tensor& x, int rank, const char* layout) const;

 private:
  std::string name_;
};

class Conv2d : public ConvLayer {
 public:
  /// Throws as ConvLayer's constructor.
  Conv2d(int64_t in_channels, int64_t out_channels, Int2 kernel_size, Rng& rng,
         const Conv2dOptions& options = {}, Dtype dtype = get_default_dtype());
  /// x (N, C_in, H, W) -> (N, C_out, H_out, W_out). Throws ShapeError naming the layer when x
  /// is not of rank 4 with C_in channels, else as conv2d.
  Tensor forward(const Tensor& x) const override;

  Int2 kernel_size;
  Conv2dOptions options;
};

/// Conv2d over one spatial axis: the same arguments, one int each, and the same errors.
class Conv1d : public ConvLayer {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Rng& rng,
         const Conv1dOptions& options = {}, Dtype dtype = get_default_dtype());
  Tensor forward(const Tensor& x) const override;  // (N, C_in, L) -> (N, C_out, L_out)

  int64_t kernel_size;  // k
  Conv1dOptions options;
};

}  // namespace tg::nn
