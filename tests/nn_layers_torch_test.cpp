// The layers of nn/ (Conv1d, Conv2d, MaxPool2d, AvgPool2d, Flatten, the activation layers,
// Sequential, Linear) and the image classifiers (pytorch/examples' mnist Net, the MLP) against
// the torch.nn modules of tests/nn_layers_reference.py loaded with the same weights by
// load_state_dict (strict, so the state_dict names must be PyTorch's): the float64 output and the
// gradients of sum(y * w), w fixed random weights, for the input and every parameter agree to
// 1e-12 relative. Negative controls: a layer compared with a different torch layer must fail the
// same comparison. Also the init bounds of PyTorch's kaiming-uniform and the names of the trees.
// python3 with numpy and torch is required (its absence fails the suite).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/nn/activation.h>
#include <tapegrad/nn/conv.h>
#include <tapegrad/nn/flatten.h>
#include <tapegrad/nn/image_classifiers.h>
#include <tapegrad/nn/pool.h>
#include <tapegrad/nn/sequential.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace tg::nn {
namespace {

namespace fs = std::filesystem;

// Relative to the largest magnitude of `want`; infinite for another shape.
double rel_diff(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  double scale = 0, diff = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    scale = std::max(scale, std::abs(w[i]));
    diff = std::max(diff, std::abs(g[i] - w[i]));
  }
  return diff / std::max(scale, 1e-300);
}

struct LayerCase {
  std::string name;
  std::function<std::unique_ptr<Layer>(Rng&)> make;
  Shape x;
  std::string torch;  // the Python expression of the torch module
  bool mismatch = false;  // a negative control: the two must disagree
};

template <class L, class... A>
std::function<std::unique_ptr<Layer>(Rng&)> make(A... args) {
  return [=](Rng& rng) -> std::unique_ptr<Layer> {
    if constexpr (std::is_constructible_v<L, A..., Rng&>)
      return std::make_unique<L>(args..., rng);
    else
      return std::make_unique<L>(args...);
  };
}

// A conv layer (in, out, kernel, rng, options), PyTorch's argument order with the Rng after the sizes.
template <class L, class K, class O>
std::function<std::unique_ptr<Layer>(Rng&)> conv(int64_t in, int64_t out, K kernel, O options) {
  return [=](Rng& rng) -> std::unique_ptr<Layer> {
    return std::make_unique<L>(in, out, kernel, rng, options);
  };
}

std::vector<LayerCase> cases() {
  Conv2dOptions strided{.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2};
  Conv2dOptions no_bias{.bias = false};
  Conv1dOptions c1{.stride = 2, .padding = 1, .dilation = 2, .groups = 1};
  Conv1dOptions grouped{.groups = 3, .bias = false};
  const auto seq = [](Rng& rng) -> std::unique_ptr<Layer> {
    auto s = std::make_unique<Sequential>();
    s->append(std::make_unique<Conv2d>(2, 3, 3, rng));
    s->append(std::make_unique<ReLU>());
    s->append(std::make_unique<MaxPool2d>(2));
    s->append(std::make_unique<Flatten>());
    s->append(std::make_unique<Linear>(12, 4, true, rng, Dtype::f64));
    s->append(std::make_unique<Tanh>());
    return s;
  };
  const auto net = [](Rng& rng) -> std::unique_ptr<Layer> {
    return std::make_unique<MnistNet>(MnistNetConfig{.dtype = Dtype::f64}, rng);
  };
  const auto mlp = [](Rng& rng) -> std::unique_ptr<Layer> {
    return std::make_unique<Mlp>(MlpConfig{.hidden = 16, .dtype = Dtype::f64}, rng);
  };
  return {
      {"conv2d", conv<Conv2d>(3, 4, Int2(3), Conv2dOptions{}), {2, 3, 7, 6}, "nn.Conv2d(3, 4, 3)"},
      {"conv2d_options", conv<Conv2d>(4, 6, Int2(3, 2), strided), {2, 4, 7, 8},
       "nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)"},
      {"conv2d_no_bias", conv<Conv2d>(1, 2, Int2(2), no_bias), {1, 1, 4, 5},
       "nn.Conv2d(1, 2, 2, bias=False)"},
      {"conv1d", conv<Conv1d>(2, 3, int64_t{3}, c1), {2, 2, 9},
       "nn.Conv1d(2, 3, 3, stride=2, padding=1, dilation=2)"},
      {"conv1d_groups", conv<Conv1d>(3, 6, int64_t{2}, grouped), {1, 3, 5},
       "nn.Conv1d(3, 6, 2, groups=3, bias=False)"},
      {"maxpool2d", make<MaxPool2d>(Int2(2)), {2, 3, 6, 5}, "nn.MaxPool2d(2)"},
      {"maxpool2d_options", make<MaxPool2d>(Int2(3, 2), std::optional<Int2>(Int2(2, 1)), Int2(1, 1)),
       {1, 2, 7, 5}, "nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1))"},
      {"avgpool2d", make<AvgPool2d>(Int2(3), std::optional<Int2>(Int2(2)), Int2(1)), {2, 2, 7, 6},
       "nn.AvgPool2d(3, stride=2, padding=1)"},
      {"flatten", make<Flatten>(), {2, 3, 4, 2}, "nn.Flatten()"},
      {"flatten_1_2", make<Flatten>(int64_t{1}, int64_t{2}), {2, 3, 4, 2}, "nn.Flatten(1, 2)"},
      {"flatten_0_m2", make<Flatten>(int64_t{0}, int64_t{-2}), {2, 3, 4}, "nn.Flatten(0, -2)"},
      {"relu", make<ReLU>(), {3, 5}, "nn.ReLU()"},
      {"gelu", make<GELU>(), {2, 3, 4}, "nn.GELU()"},
      {"gelu_tanh", make<GELU>(GeluApproximate::tanh), {2, 3, 4}, "nn.GELU(approximate='tanh')"},
      {"silu", make<SiLU>(), {4, 3}, "nn.SiLU()"},
      {"tanh", make<Tanh>(), {4, 3}, "nn.Tanh()"},
      {"sigmoid", make<Sigmoid>(), {4, 3}, "nn.Sigmoid()"},
      {"linear", make<Linear>(int64_t{5}, int64_t{3}, true), {4, 5}, "nn.Linear(5, 3)"},
      {"sequential", seq, {2, 2, 6, 6},
       "nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), "
       "nn.Linear(12, 4), nn.Tanh())"},
      {"mnist_net", net, {3, 1, 28, 28}, "Net()"},
      {"mlp", mlp, {3, 1, 28, 28}, "Mlp(16)"},
      // Negative controls: the same shapes and names, another function.
      {"control_avg_for_max", make<AvgPool2d>(Int2(2)), {2, 3, 6, 5}, "nn.MaxPool2d(2)", true},
      {"control_gelu_tanh", make<GELU>(GeluApproximate::tanh), {2, 3, 4}, "nn.GELU()", true},
      {"control_conv_padding", conv<Conv2d>(2, 2, Int2(3), Conv2dOptions{.padding = 1}),
       {1, 2, 5, 5}, "nn.Conv2d(2, 2, 3, padding=1, padding_mode='reflect')", true},
  };
}

TEST(NnLayers, MatchTorchNnFromTheSameWeights) {
  ASSERT_EQ(test::python_missing("numpy, torch"), "") << "these tests need PyTorch";
  const test::TempDir dir;
  const std::vector<LayerCase> all = cases();
  struct Ours {
    std::unique_ptr<Layer> layer;
    Tensor x, y;
  };
  std::vector<Ours> ours;
  std::ofstream list(dir / "cases.txt");
  Rng rng(7);
  for (const LayerCase& c : all) {
    const fs::path d = dir / c.name;
    fs::create_directories(d);
    Ours o;
    o.layer = c.make(rng);
    o.layer->eval();
    o.x = randn(c.x, rng, Dtype::f64).set_requires_grad();
    o.y = o.layer->forward(o.x);
    const Tensor w = randn(o.y.shape(), rng, Dtype::f64);
    sum(mul(o.y, w)).backward();
    write_npy((d / "x.npy").string(), o.x);
    write_npy((d / "w.npy").string(), w);
    for (const auto& [name, p] : o.layer->named_parameters())
      write_npy((d / ("p." + name + ".npy")).string(), p);
    list << c.name << " " << c.torch << "\n";
    ours.push_back(std::move(o));
  }
  list.close();
  const std::string log = dir.file("log");
  const std::string cmd = test::kPython + " " + TAPEGRAD_NN_LAYERS_REFERENCE_PY + " --dir " +
                          dir.path().string() + " > " + log + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::slurp(log);
  for (size_t i = 0; i < all.size(); ++i) {
    const LayerCase& c = all[i];
    SCOPED_TRACE(c.name + ": " + c.torch);
    const fs::path d = dir / c.name;
    double worst = rel_diff(ours[i].y, read_npy((d / "y.npy").string()));
    worst = std::max(worst, rel_diff(ours[i].x.grad(), read_npy((d / "dx.npy").string())));
    for (const auto& [name, p] : ours[i].layer->named_parameters())
      worst = std::max(worst, rel_diff(p.grad(), read_npy((d / ("g." + name + ".npy")).string())));
    if (c.mismatch)
      EXPECT_GT(worst, 1e-6) << "a negative control agreed";
    else
      EXPECT_LE(worst, 1e-12);
  }
}

// PyTorch's init of a conv layer: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), filling
// the range (the largest draw near the bound) with the uniform's variance bound^2 / 3.
TEST(NnLayers, ConvInitIsKaimingUniformWithinOneOverSqrtFanIn) {
  Rng rng(3);
  const Conv2d conv(6, 64, Int2(3, 5), rng, {.groups = 2}, Dtype::f64);  // fan_in = 3 * 15
  const Conv1d conv1(4, 512, 3, rng, {}, Dtype::f64);                  // fan_in = 12
  // Of n draws the largest passes 1 - 8 / n of the bound but once in e^8; the variance is
  // within 4 standard errors (sqrt(0.8 / n) relative for a uniform).
  const auto check = [](const Tensor& t, double bound) {
    const std::vector<double> v = t.to_vector();
    double mx = 0, mean = 0, sq = 0;
    for (double x : v) {
      mx = std::max(mx, std::abs(x));
      mean += x;
      sq += x * x;
    }
    mean /= static_cast<double>(v.size());
    const double var = sq / static_cast<double>(v.size()) - mean * mean;
    EXPECT_LE(mx, bound);
    const auto n = static_cast<double>(v.size());
    EXPECT_GT(mx, (1 - 8 / n) * bound);
    EXPECT_NEAR(var, bound * bound / 3, 4 * std::sqrt(0.8 / n) * bound * bound / 3);
  };
  EXPECT_EQ(conv.weight.shape(), (Shape{64, 3, 3, 5}));
  check(conv.weight, 1 / std::sqrt(45.0));
  check(conv.bias, 1 / std::sqrt(45.0));
  check(conv1.weight, 1 / std::sqrt(12.0));
  check(conv1.bias, 1 / std::sqrt(12.0));
}

std::vector<std::string> names(const Module& m) {
  std::vector<std::string> n;
  for (const auto& [name, t] : m.state_dict()) n.push_back(name);
  return n;
}

TEST(NnLayers, StateDictNamesFollowTheTree) {
  Rng rng(1);
  Sequential s;
  s.append(std::make_unique<Conv2d>(1, 2, 3, rng));
  s.append(std::make_unique<ReLU>());
  s.append(std::make_unique<Conv1d>(2, 2, 1, rng, Conv1dOptions{.bias = false}));
  s.append(std::make_unique<Linear>(3, 4, true, rng));
  EXPECT_EQ(names(s), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "3.weight", "3.bias"}));
  const MnistNet net({}, rng);
  EXPECT_EQ(names(net), (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight",
                                                  "conv2.bias", "fc1.weight", "fc1.bias",
                                                  "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(net.num_parameters(), 1199882);  // pytorch/examples' Net
  const Mlp mlp({.hidden = 32}, rng);
  EXPECT_EQ(names(mlp), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(mlp.fc1.weight.shape(), (Shape{32, 784}));
}

TEST(NnLayers, DropoutLayersFollowTrainAndSetDropout) {
  Rng rng(2);
  MnistNet net({.dtype = Dtype::f64}, rng);
  const Tensor x = randn({2, 1, 28, 28}, rng, Dtype::f64);
  net.eval();
  const Tensor a = net(x), b = net(x);
  EXPECT_TRUE(test::same_bytes(a, b));
  net.train();
  EXPECT_FALSE(test::same_bytes(net(x), a));  // dropout on in training
  net.set_dropout(0);
  EXPECT_TRUE(test::same_bytes(net(x), a));   // p = 0: the eval output
  EXPECT_EQ(net.config().dropout1, 0);
  EXPECT_EQ(net.config().dropout2, 0);
  test::expect_throws<ValueError>([&] { net.set_dropout(1); }, {"MnistNet", "dropout"});
}

TEST(NnLayers, ConfigsGoToAndFromJson) {
  const MnistNetConfig n{.dropout1 = 0.125, .dropout2 = 0.75, .dtype = Dtype::f64};
  const std::string nj = mnist_net_config_to_json(n);
  EXPECT_EQ(nj, R"({"dropout1":0.125,"dropout2":0.75,"dtype":"f64"})");
  const MnistNetConfig n2 = mnist_net_config_from_json(nj);
  EXPECT_EQ(n2.dropout1, 0.125);
  EXPECT_EQ(n2.dropout2, 0.75);
  EXPECT_EQ(n2.dtype, Dtype::f64);
  const std::string mj = mlp_config_to_json({.hidden = 100});
  EXPECT_EQ(mj, R"({"dtype":"f32","hidden":100})");
  EXPECT_EQ(mlp_config_from_json(mj).hidden, 100);
  test::expect_throws<ValueError>([] { mlp_config_from_json(R"({"dtype":"f32"})"); }, {"hidden"});
  test::expect_throws<ValueError>([] { mnist_net_config_from_json("[1]"); }, {"JSON object"});
}

}  // namespace
}  // namespace tg::nn
