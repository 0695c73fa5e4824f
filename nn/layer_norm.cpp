#include <tapegrad/nn/layer_norm.h>

#include <string>

#include <tapegrad/ops/layer_norm.h>

namespace tg::nn {

LayerNorm::LayerNorm(int64_t C_, bool has_bias, Dtype dtype) : C(C_) {
  if (C < 1 || !is_floating(dtype))
    throw ValueError("LayerNorm(" + std::to_string(C) +
                     "): C must be >= 1 and the dtype float32 or float64");
  weight = ones({C}, dtype);
  register_parameter("weight", weight);
  if (has_bias) {
    bias = zeros({C}, dtype);
    register_parameter("bias", bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  if (x.rank() < 1 || x.size(-1) != C)
    throw ShapeError("LayerNorm(" + std::to_string(C) + "): input " + x.shape().str() +
                     " must be (..., " + std::to_string(C) + ")");
  return layer_norm(x, weight, bias, 1e-5);  // (..., C)
}

}  // namespace tg::nn
