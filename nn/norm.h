#pragma once
// The normalisation layers, as torch.nn's: BatchNorm1d, BatchNorm2d, GroupNorm and RMSNorm, with
// PyTorch's parameter and buffer names, defaults and init (weight 1, bias 0).
//
// BatchNorm keeps its running statistics as buffers (running_mean 0, running_var 1,
// num_batches_tracked int64 0), saved and loaded with the state dict: in training mode a forward
// normalises with the batch's statistics and updates them (momentum 0.1 by default; no momentum:
// their cumulative average, each batch weighted 1 / num_batches_tracked); in evaluation mode it
// uses them. With track_running_stats false it has no buffers and always normalises with the
// batch's statistics, in evaluation mode too (PyTorch's rule).

#include <cstdint>
#include <optional>

#include <tapegrad/nn/module.h>

namespace tg::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // std::nullopt: the cumulative average (PyTorch's None)
  bool affine = true;                    // weight and bias parameters
  bool track_running_stats = true;       // false: no buffers, the batch's statistics always
};

/// What BatchNorm1d and BatchNorm2d share; `ranks` names the input ranks the layer accepts.
class BatchNorm : public Module {
 public:
  /// x (N, C, ...) -> the same shape. Throws ShapeError for another rank or channel count, and
  /// what ops' batch_norm throws (one value per channel in training).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight;               // (C,), undefined without affine
  Tensor bias;                 // (C,), undefined without affine
  Tensor running_mean;         // (C,) buffer (undefined without track_running_stats)
  Tensor running_var;          // (C,) buffer (undefined without track_running_stats)
  Tensor num_batches_tracked;  // () int64 buffer: training forwards so far (the same)

 protected:
  /// Throws ValueError for C < 1, momentum not finite, eps < 0 or an int64 dtype.
  BatchNorm(const char* kind, int64_t C, BatchNormOptions o, Dtype dtype, int min_rank,
            int max_rank);

 private:
  const char* kind_;
  int min_rank_, max_rank_;
};

/// torch.nn.BatchNorm1d(C): input (N, C) or (N, C, L).
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t C, BatchNormOptions o = {}, Dtype dtype = get_default_dtype())
      : BatchNorm("BatchNorm1d", C, o, dtype, 2, 3) {}
};

/// torch.nn.BatchNorm2d(C): input (N, C, H, W).
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t C, BatchNormOptions o = {}, Dtype dtype = get_default_dtype())
      : BatchNorm("BatchNorm2d", C, o, dtype, 4, 4) {}
};

/// torch.nn.GroupNorm(num_groups, num_channels, eps, affine): input (N, C, *).
class GroupNorm : public Module {
 public:
  /// Throws ValueError for groups < 1, C not divisible by groups, eps < 0 or an int64 dtype.
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            Dtype dtype = get_default_dtype());

  /// x (N, C, *) -> the same shape. Throws ShapeError for rank < 2 or another channel count.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  int64_t num_groups, num_channels;
  double eps;
  Tensor weight;  // (C,), undefined without affine
  Tensor bias;    // (C,), undefined without affine
};

/// torch.nn.RMSNorm(C, eps, elementwise_affine) over the last axis: y = x / sqrt(mean(x^2) +
/// eps) * weight; eps unset means the machine epsilon of the input's dtype, as PyTorch's.
class RMSNorm : public Module {
 public:
  /// Throws ValueError for C < 1, eps < 0 or an int64 dtype.
  explicit RMSNorm(int64_t C, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true, Dtype dtype = get_default_dtype());

  /// x (..., C) -> the same shape. Throws ShapeError when the last axis is not C.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  int64_t C;
  std::optional<double> eps;
  Tensor weight;  // (C,), undefined without elementwise_affine
};

}  // namespace tg::nn
