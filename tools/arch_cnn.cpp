// --arch cnn and --arch mlp: nn/image_classifiers.h's MnistNet (pytorch/examples' mnist Net)
// and Mlp as the program's Models, trained on --images. Logits (N, 10) of images (N, 1, 28, 28),
// the loss the mean cross-entropy against the labels (N). --dropout sets both of Net's dropouts
// through set_dropout (one flag, two config fields, Net's own 0.25 and 0.5 kept without it).

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <tapegrad/nn/image_classifiers.h>
#include <tapegrad/ops/cross_entropy.h>
#include "tools/arch.h"

namespace tg {

extern const Arch kCnnArch;
extern const Arch kMlpArch;

namespace {

constexpr ModelFlag kCnnFlags[] = {
    {"dtype", "dtype", &TrainArgs::dtype},
};

constexpr ModelFlag kMlpFlags[] = {
    {"hidden", "hidden", &TrainArgs::hidden},
    {"dtype", "dtype", &TrainArgs::dtype},
};

// What the two classifiers share: labels (N) against logits (N, 10).
class ImageModel : public Model {
 public:
  Tensor loss(const Tensor& logits, const Tensor& labels) const override {
    return cross_entropy(logits, labels, -1);
  }
};

class CnnModel : public ImageModel {
 public:
  CnnModel(const nn::MnistNetConfig& config, Rng& init_rng)
      : net_(std::make_unique<nn::MnistNet>(config, init_rng)) {}

  const Arch& arch() const override { return kCnnArch; }
  nn::Module& module() const override { return *net_; }
  Dtype dtype() const override { return net_->config().dtype; }
  std::string config_json() const override { return nn::mnist_net_config_to_json(net_->config()); }
  std::string summary() const override { return "MNIST Net"; }
  Tensor forward(const Tensor& x) const override { return net_->forward(x); }
  Rng& dropout_rng() override { return net_->dropout_rng(); }
  void set_dropout(double p) override { net_->set_dropout(p); }

 private:
  std::unique_ptr<nn::MnistNet> net_;
};

class MlpModel : public ImageModel {
 public:
  MlpModel(const nn::MlpConfig& config, Rng& init_rng)
      : mlp_(std::make_unique<nn::Mlp>(config, init_rng)) {}

  const Arch& arch() const override { return kMlpArch; }
  nn::Module& module() const override { return *mlp_; }
  Dtype dtype() const override { return mlp_->config().dtype; }
  std::string config_json() const override { return nn::mlp_config_to_json(mlp_->config()); }
  std::string summary() const override {
    return "MLP, hidden " + std::to_string(mlp_->config().hidden);
  }
  Tensor forward(const Tensor& x) const override { return mlp_->forward(x); }
  Rng& dropout_rng() override { return no_dropout_; }
  void set_dropout(double p) override {
    if (p != 0) throw ValueError("--arch mlp has no dropout; --dropout must be 0");
  }

 private:
  std::unique_ptr<nn::Mlp> mlp_;
  Rng no_dropout_{0};  // saved and restored as every model's, drawn from by nothing
};

// The flags' config has no dropouts (no flag sets them one by one): Net's own fill them in. A
// checkpoint's config has both.
std::string with_net_dropouts(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return json;  // refused by the parser below, naming the config
  const nn::MnistNetConfig net;
  if (!j.contains("dropout1")) j["dropout1"] = net.dropout1;
  if (!j.contains("dropout2")) j["dropout2"] = net.dropout2;
  return j.dump();
}

std::unique_ptr<Model> build_cnn(const std::string& json, Rng& init_rng) {
  const nn::MnistNetConfig config = nn::mnist_net_config_from_json(with_net_dropouts(json));
  try {
    return std::make_unique<CnnModel>(config, init_rng);
  } catch (const ValueError&) {
    throw ValueError(json + " is not a valid MNIST Net config");
  }
}

std::unique_ptr<Model> build_mlp(const std::string& json, Rng& init_rng) {
  const nn::MlpConfig config = nn::mlp_config_from_json(json);
  try {
    return std::make_unique<MlpModel>(config, init_rng);
  } catch (const ValueError&) {
    throw ValueError(json + " is not a valid MLP config");
  }
}

}  // namespace

const Arch kCnnArch{"cnn", kCnnFlags, &build_cnn, /*images=*/true};  // external: declared above
const Arch kMlpArch{"mlp", kMlpFlags, &build_mlp, /*images=*/true};

}  // namespace tg
