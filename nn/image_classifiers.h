#pragma once
// Two image classifiers for (N, 1, 28, 28) images (MNIST, Fashion-MNIST), logits (N, 10):
//
//   MnistNet, pytorch/examples' mnist `Net`, with its parameter names:
//     conv1 (1 -> 32, 3x3), relu, conv2 (32 -> 64, 3x3), relu, max_pool2d 2, dropout1 (0.25),
//     flatten, fc1 (9216 -> 128), relu, dropout2 (0.5), fc2 (128 -> 10)
//   Mlp: flatten, fc1 (784 -> hidden), relu, fc2 (hidden -> 10)
//
// Weights as PyTorch's default init of each layer, drawn in the order of the layers. Each
// model's dropout draws from an Rng the model owns (a run saves and restores it).

#include <cstdint>
#include <string>

#include <tapegrad/nn/conv.h>
#include <tapegrad/nn/dropout.h>
#include <tapegrad/nn/layer.h>
#include <tapegrad/nn/linear.h>

namespace tg::nn {

struct MnistNetConfig {
  double dropout1 = 0.25;  // after the pooling
  double dropout2 = 0.5;   // after fc1
  Dtype dtype = Dtype::f32;
};

struct MlpConfig {
  int64_t hidden = 256;
  Dtype dtype = Dtype::f32;
};

class MnistNet : public Layer {
 public:
  /// Throws ValueError for a dropout outside [0, 1) or an int64 dtype.
  MnistNet(const MnistNetConfig& config, Rng& init_rng);
  /// x (N, 1, 28, 28) -> logits (N, 10). Throws ShapeError naming the layer that refuses x.
  Tensor forward(const Tensor& x) const override;
  /// Sets both dropouts' p (and the config's). Throws ValueError for p outside [0, 1).
  void set_dropout(double p);

  MnistNetConfig config() const { return config_; }
  Rng& dropout_rng() { return dropout_rng_; }

 private:
  MnistNetConfig config_;
  Rng dropout_rng_{0};

 public:
  Conv2d conv1, conv2;
  Dropout dropout1, dropout2;
  Linear fc1, fc2;
};

class Mlp : public Layer {
 public:
  /// Throws ValueError for hidden < 1 or an int64 dtype.
  Mlp(const MlpConfig& config, Rng& init_rng);
  /// x (N, 1, 28, 28) (or any (N, ...) of 784 elements a row) -> logits (N, 10). Throws
  /// ShapeError when a row is not 784 elements.
  Tensor forward(const Tensor& x) const override;

  MlpConfig config() const { return config_; }

 private:
  MlpConfig config_;

 public:
  Linear fc1, fc2;
};

/// The configs as JSON text, the tapegrad.config of a checkpoint:
///   {"dropout1":0.25,"dropout2":0.5,"dtype":"f32"}   {"dtype":"f32","hidden":256}
/// Never throws.
std::string mnist_net_config_to_json(const MnistNetConfig& config);
std::string mlp_config_to_json(const MlpConfig& config);
/// Parse the JSON text. Throw ValueError naming the field (not an object, missing, mistyped).
MnistNetConfig mnist_net_config_from_json(const std::string& json);
MlpConfig mlp_config_from_json(const std::string& json);

}  // namespace tg::nn
