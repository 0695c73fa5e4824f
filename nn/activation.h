#pragma once
// The activation functions as layers, as torch.nn's ReLU, GELU, SiLU, Tanh and Sigmoid: no
// parameters, elementwise on any shape, the op of the same name underneath.

#include <tapegrad/nn/layer.h>
#include <tapegrad/ops/gelu.h>
#include <tapegrad/ops/relu.h>
#include <tapegrad/ops/sigmoid.h>
#include <tapegrad/ops/silu.h>
#include <tapegrad/ops/tanh.h>

namespace tg::nn {

/// max(x, 0).
class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& x) const override { return relu(x); }
};

/// x Phi(x), Phi exact (erf, PyTorch's approximate='none') or by the tanh approximation.
class GELU : public Layer {
 public:
  explicit GELU(GeluApproximate approximate = GeluApproximate::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) const override { return gelu(x, approximate_); }

 private:
  GeluApproximate approximate_;
};

/// x sigmoid(x).
class SiLU : public Layer {
 public:
  Tensor forward(const Tensor& x) const override { return silu(x); }
};

class Tanh : public Layer {
 public:
  Tensor forward(const Tensor& x) const override { return tanh(x); }
};

/// 1 / (1 + exp(-x)).
class Sigmoid : public Layer {
 public:
  Tensor forward(const Tensor& x) const override { return sigmoid(x); }
};

}  // namespace tg::nn
