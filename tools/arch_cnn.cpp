// --arch cnn and --arch mlp: nn/image_classifiers.h's MnistNet (pytorch/examples' mnist Net)
// and Mlp as the program's Models, trained on --images. Logits (N, 10) of images (N, 1, 28, 28),
// the loss the mean cross-entropy against the labels (N). --dropout sets both of Net's dropouts
// through set_dropout (one flag, two config fields, Net's own 0.25 and 0.5 kept without it).

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

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

// The two nets' own words: their config's JSON, the title of loss.svg.
std::string config_text(const nn::MnistNetConfig& c) { return nn::mnist_net_config_to_json(c); }
std::string config_text(const nn::MlpConfig& c) { return nn::mlp_config_to_json(c); }
std::string title(const nn::MnistNet&) { return "MNIST Net"; }
std::string title(const nn::Mlp& mlp) { return "MLP, hidden " + std::to_string(mlp.config().hidden); }

// A classifier (MnistNet or Mlp) as a Model: logits (N, 10), labels (N).
template <class Net>
class ImageModel : public Model {
 public:
  template <class Config>
  ImageModel(const Arch& arch, const Config& config, Rng& init_rng)
      : arch_(arch), net_(std::make_unique<Net>(config, init_rng)) {}

  Tensor forward(const Tensor& x) const override { return net_->forward(x); }
  Tensor loss(const Tensor& logits, const Tensor& labels) const override {
    return cross_entropy(logits, labels, -1);
  }
  const Arch& arch() const override { return arch_; }
  nn::Module& module() const override { return *net_; }
  Dtype dtype() const override { return net_->config().dtype; }
  std::string config_json() const override { return config_text(net_->config()); }
  std::string summary() const override { return title(*net_); }
  Rng& dropout_rng() override {
    if constexpr (std::is_same_v<Net, nn::MnistNet>) return net_->dropout_rng();
    return no_dropout_;  // saved and restored as every model's, drawn from by nothing
  }
  void set_dropout(double p) override {
    if constexpr (std::is_same_v<Net, nn::MnistNet>)
      net_->set_dropout(p);
    else if (p != 0)
      throw ValueError(std::string("--arch ") + arch_.name + " has no dropout; --dropout must be 0");
  }

 private:
  const Arch& arch_;
  std::unique_ptr<Net> net_;
  Rng no_dropout_{0};
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
    return std::make_unique<ImageModel<nn::MnistNet>>(kCnnArch, config, init_rng);
  } catch (const ValueError&) {
    throw ValueError(json + " is not a valid MNIST Net config");
  }
}

std::unique_ptr<Model> build_mlp(const std::string& json, Rng& init_rng) {
  const nn::MlpConfig config = nn::mlp_config_from_json(json);
  try {
    return std::make_unique<ImageModel<nn::Mlp>>(kMlpArch, config, init_rng);
  } catch (const ValueError&) {
    throw ValueError(json + " is not a valid MLP config");
  }
}

}  // namespace

const Arch kCnnArch{"cnn", kCnnFlags, &build_cnn, /*images=*/true};  // external: declared above
const Arch kMlpArch{"mlp", kMlpFlags, &build_mlp, /*images=*/true};

}  // namespace tg
