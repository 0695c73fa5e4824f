#include <tapegrad/nn/image_classifiers.h>

#include <vector>

#include <tapegrad/nn/config_json.h>
#include <tapegrad/ops/pool.h>
#include <tapegrad/ops/relu.h>
#include <tapegrad/ops/reshape.h>

namespace tg::nn {

namespace {

constexpr int64_t kPixels = 28 * 28, kClasses = 10;

// (N, ...) -> (N, prod(...)): torch.flatten(x, 1), checked against the features a layer takes.
Tensor flatten_rows(const Tensor& x, int64_t features, const char* who) {
  const int64_t row = x.rank() >= 1 && x.size(0) > 0 ? x.numel() / x.size(0) : 0;
  if (x.rank() < 2 || row != features)
    throw ShapeError(std::string(who) + ": input " + x.shape().str() + " must be (N, ...) of " +
                     std::to_string(features) + " elements a row");
  return reshape(x, {x.size(0), features});  // (N, features)
}

Dtype checked_dtype(Dtype dtype, const char* who) {
  if (!is_floating(dtype)) throw ValueError(std::string(who) + ": the dtype must be f32 or f64");
  return dtype;
}

std::vector<ConfigField> net_fields(MnistNetConfig& c) {
  return {{"dropout1", &c.dropout1},
          {"dropout2", &c.dropout2},
          {"dtype", enum_ref(c.dtype, kDtypeNames)}};
}

std::vector<ConfigField> mlp_fields(MlpConfig& c) {
  return {{"hidden", &c.hidden}, {"dtype", enum_ref(c.dtype, kDtypeNames)}};
}

}  // namespace

MnistNet::MnistNet(const MnistNetConfig& config, Rng& init_rng)
    : config_(config),
      conv1(1, 32, 3, init_rng, {}, checked_dtype(config.dtype, "MnistNet")),
      conv2(32, 64, 3, init_rng, {}, config.dtype),
      dropout1(config.dropout1, dropout_rng_),
      dropout2(config.dropout2, dropout_rng_),
      fc1(9216, 128, true, init_rng, config.dtype),
      fc2(128, kClasses, true, init_rng, config.dtype) {
  register_module("conv1", conv1);
  register_module("conv2", conv2);
  register_module("dropout1", dropout1);
  register_module("dropout2", dropout2);
  register_module("fc1", fc1);
  register_module("fc2", fc2);
}

Tensor MnistNet::forward(const Tensor& x) const {
  Tensor h = relu(conv1(x));                                 // (N, 32, 26, 26)
  h = relu(conv2(h));                                        // (N, 64, 24, 24)
  h = dropout1(max_pool2d(h, 2));                            // (N, 64, 12, 12)
  h = dropout2(relu(fc1(flatten_rows(h, 9216, "MnistNet"))));  // (N, 128)
  return fc2(h);                                             // (N, 10)
}

void MnistNet::set_dropout(double p) {
  if (!(p >= 0.0 && p < 1.0))
    throw ValueError("MnistNet: dropout p = " + std::to_string(p) + " is outside [0, 1)");
  dropout1.p = dropout2.p = config_.dropout1 = config_.dropout2 = p;
}

Mlp::Mlp(const MlpConfig& config, Rng& init_rng)
    : config_(config),
      fc1(kPixels, config.hidden, true, init_rng, checked_dtype(config.dtype, "Mlp")),
      fc2(config.hidden, kClasses, true, init_rng, config.dtype) {
  if (config.hidden < 1) throw ValueError("Mlp: hidden = " + std::to_string(config.hidden) + " < 1");
  register_module("fc1", fc1);
  register_module("fc2", fc2);
}

Tensor Mlp::forward(const Tensor& x) const {
  return fc2(relu(fc1(flatten_rows(x, kPixels, "Mlp"))));  // (N, 10)
}

std::string mnist_net_config_to_json(const MnistNetConfig& config) {
  MnistNetConfig c = config;  // the field list refers to members it may write
  return config_to_json(net_fields(c));
}

std::string mlp_config_to_json(const MlpConfig& config) {
  MlpConfig c = config;
  return config_to_json(mlp_fields(c));
}

MnistNetConfig mnist_net_config_from_json(const std::string& json) {
  MnistNetConfig c;
  config_from_json(json, net_fields(c));
  return c;
}

MlpConfig mlp_config_from_json(const std::string& json) {
  MlpConfig c;
  config_from_json(json, mlp_fields(c));
  return c;
}

}  // namespace tg::nn
