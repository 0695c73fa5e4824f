#pragma once
// Layer: a module of one input and one output, y = forward(x), the kind nn::Sequential chains
// (Linear, Conv2d, ReLU, Flatten, ...). Modules of several inputs or outputs (attention with a
// cache, LSTM with its state) stay plain Modules with forward functions of their own.

#include <tapegrad/nn/module.h>

namespace tg::nn {

class Layer : public Module {
 public:
  /// The layer's output for x. Throws as the layer says (ShapeError for an input it does not
  /// take, naming the layer and the shape).
  virtual Tensor forward(const Tensor& x) const = 0;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }
};

}  // namespace tg::nn
