#pragma once
// Sequential, as torch.nn.Sequential: layers applied in order, y = layer_n(... layer_0(x)),
// the children named 0, 1, ... so that parameter names read `0.weight`, `3.bias`.
//
//   Sequential net;
//   net.append(std::make_unique<Conv2d>(1, 8, 3, rng));
//   net.append(std::make_unique<ReLU>());
//   Tensor y = net(x);

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/nn/layer.h>

namespace tg::nn {

class Sequential : public Layer {
 public:
  /// Appends a layer as the child named by its index and returns it. Throws ValueError for a
  /// null layer.
  template <class L>
  L& append(std::unique_ptr<L> layer) {
    if (!layer) throw ValueError("Sequential: layer " + std::to_string(layers_.size()) + " is null");
    L& ref = *layer;
    register_module(std::to_string(layers_.size()), ref);
    layers_.push_back(std::move(layer));
    return ref;
  }
  /// x through every layer in order (x itself when there are none). Throws as the layers do.
  Tensor forward(const Tensor& x) const override {
    Tensor y = x;
    for (const auto& layer : layers_) y = (*layer)(y);  // a call: its forward hooks run
    return y;
  }
  std::size_t size() const { return layers_.size(); }
  Layer& operator[](std::size_t i) { return *layers_.at(i); }
  const Layer& operator[](std::size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace tg::nn
