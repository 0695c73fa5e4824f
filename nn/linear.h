#pragma once
// Linear, as torch.nn.Linear: y = x W^T + b, with W (out, in) and b (out,).

#include <cstdint>

#include <tapegrad/nn/module.h>

namespace tg::nn {

class Linear : public Module {
 public:
  /// W drawn from N(0, init_std^2) (nanoGPT's init; 0.02 by default), b zero. Throws ValueError
  /// for a negative size or an int64 dtype.
  Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng, Dtype dtype = Dtype::f32,
         double init_std = 0.02);

  /// x (..., in) -> (..., out). Throws ShapeError when x's last axis is not in_features,
  /// ValueError when dtypes differ.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t in_features, out_features;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out,), undefined without bias
};

}  // namespace tg::nn
