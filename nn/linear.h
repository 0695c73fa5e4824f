#pragma once
// Linear, as torch.nn.Linear: y = x W^T + b, with W (out, in) and b (out,).

#include <cstdint>
#include <optional>

#include <tapegrad/nn/layer.h>

namespace tg::nn {

class Linear : public Layer {
 public:
  /// Without init_std, torch.nn.Linear's init: W by kaiming_uniform_ with a = sqrt(5), that is
  /// U(-1/sqrt(in), 1/sqrt(in)), then b from U(-1/sqrt(in), 1/sqrt(in)) (b zero when in = 0).
  /// With init_std, nanoGPT's: W from N(0, init_std^2), b zero. Both draw from rng row-major.
  /// Throws ValueError for a negative size or an int64 dtype.
  Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng,
         Dtype dtype = get_default_dtype(), std::optional<double> init_std = std::nullopt);

  /// x (..., in) -> (..., out). Throws ShapeError when x's last axis is not in_features,
  /// ValueError when dtypes differ.
  Tensor forward(const Tensor& x) const override;

  int64_t in_features, out_features;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out,), undefined without bias
};

}  // namespace tg::nn
