#include <tapegrad/nn/norm.h>

#include <cmath>
#include <limits>
#include <string>

#include <tapegrad/ops/batch_norm.h>
#include <tapegrad/ops/group_norm.h>
#include <tapegrad/ops/rms_norm.h>

namespace tg::nn {

namespace {

std::string named(const char* kind, int64_t C) {
  return std::string(kind) + "(" + std::to_string(C) + ")";
}

}  // namespace

BatchNorm::BatchNorm(const char* kind, int64_t C, BatchNormOptions o, Dtype dtype, int min_rank,
                     int max_rank)
    : num_features(C), options(o), kind_(kind), min_rank_(min_rank), max_rank_(max_rank) {
  if (C < 1 || !is_floating(dtype) || (o.momentum && !std::isfinite(*o.momentum)) || !(o.eps >= 0))
    throw ValueError(named(kind, C) + ": C must be >= 1, momentum finite, eps >= 0 and the dtype "
                     "float32 or float64");
  if (o.affine) {
    weight = ones({C}, dtype);
    bias = zeros({C}, dtype);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  if (!o.track_running_stats) return;
  running_mean = zeros({C}, dtype);
  running_var = ones({C}, dtype);
  num_batches_tracked = zeros(Shape{}, Dtype::i64);
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
}

Tensor BatchNorm::forward(const Tensor& x) const {
  if (x.rank() < min_rank_ || x.rank() > max_rank_ || x.size(1) != num_features)
    throw ShapeError(named(kind_, num_features) + ": input " + x.shape().str() + " must be " +
                     (max_rank_ == 3 ? "(N, C) or (N, C, L)" : "(N, C, H, W)") + " with C = " +
                     std::to_string(num_features));
  const bool tracking = options.track_running_stats;
  double momentum = options.momentum.value_or(0.0);
  if (is_training() && tracking) {
    Tensor count = num_batches_tracked;
    const int64_t n = count.data<int64_t>()[0] += 1;
    if (!options.momentum) momentum = 1.0 / static_cast<double>(n);  // the cumulative average
  }
  // Without running statistics, the batch's are used in evaluation mode too.
  return batch_norm(x, running_mean, running_var, weight, bias, is_training() || !tracking,
                    momentum, options.eps);  // (N, C, ...)
}

GroupNorm::GroupNorm(int64_t G, int64_t C, double eps_, bool affine, Dtype dtype)
    : num_groups(G), num_channels(C), eps(eps_) {
  if (G < 1 || C < 1 || C % G != 0 || !(eps >= 0) || !is_floating(dtype))
    throw ValueError("GroupNorm(" + std::to_string(G) + ", " + std::to_string(C) +
                     "): num_channels must be divisible by num_groups >= 1, eps >= 0 and the "
                     "dtype float32 or float64");
  if (affine) {
    weight = ones({C}, dtype);
    bias = zeros({C}, dtype);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}

Tensor GroupNorm::forward(const Tensor& x) const {
  if (x.rank() < 2 || x.size(1) != num_channels)
    throw ShapeError("GroupNorm(" + std::to_string(num_groups) + ", " +
                     std::to_string(num_channels) + "): input " + x.shape().str() +
                     " must be (N, " + std::to_string(num_channels) + ", *)");
  return group_norm(x, num_groups, weight, bias, eps);  // (N, C, *)
}

RMSNorm::RMSNorm(int64_t C_, std::optional<double> eps_, bool elementwise_affine, Dtype dtype)
    : C(C_), eps(eps_) {
  if (C < 1 || (eps && !(*eps >= 0)) || !is_floating(dtype))
    throw ValueError(named("RMSNorm", C) + ": C must be >= 1, eps >= 0 and the dtype float32 or "
                     "float64");
  if (elementwise_affine) {
    weight = ones({C}, dtype);
    register_parameter("weight", weight);
  }
}

Tensor RMSNorm::forward(const Tensor& x) const {
  if (x.rank() < 1 || x.size(-1) != C)
    throw ShapeError(named("RMSNorm", C) + ": input " + x.shape().str() + " must be (..., " +
                     std::to_string(C) + ")");
  const double e = eps ? *eps
                       : (x.dtype() == Dtype::f32 ? std::numeric_limits<float>::epsilon()
                                                  : std::numeric_limits<double>::epsilon());
  return rms_norm(x, weight, e);  // (..., C)
}

}  // namespace tg::nn
