#pragma once
// LayerNorm, as torch.nn.LayerNorm(C, bias=...): normalises the last axis (eps 1e-5), then
// scales by weight (init 1) and shifts by bias (init 0; none when bias is off, as nanoGPT's).

#include <cstdint>

#include <tapegrad/nn/module.h>

namespace tg::nn {

class LayerNorm : public Module {
 public:
  /// Throws ValueError for C < 1 or an int64 dtype.
  LayerNorm(int64_t C, bool bias, Dtype dtype = get_default_dtype());

  /// x (..., C) -> (..., C). Throws ShapeError when x's last axis is not C.
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  int64_t C;
  Tensor weight;  // (C,)
  Tensor bias;    // (C,), undefined without bias
};

}  // namespace tg::nn
