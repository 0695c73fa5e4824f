#include <tapegrad/nn/conv.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <tapegrad/nn/init.h>

namespace tg::nn {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The sizes every conv layer needs, checked before anything is drawn.
void check_sizes(const std::string& who, int64_t in, int64_t out, int64_t kernel_elems,
                 int64_t groups, Dtype dtype) {
  if (in < 1 || out < 1 || kernel_elems < 1 || groups < 1)
    throw ValueError(who + ": channels, kernel size and groups must be at least 1");
  if (in % groups != 0 || out % groups != 0)
    throw ValueError(who + ": groups = " + str(groups) + " must divide in_channels and out_channels");
  if (!is_floating(dtype)) throw ValueError(who + ": the dtype must be float32 or float64");
}

// torch.nn's _ConvNd.reset_parameters: weight by kaiming_uniform_(a = sqrt(5)), then the bias
// from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void reset_parameters(Tensor& weight, Tensor& bias, Rng& rng) {
  init::kaiming_uniform_(weight, rng, std::sqrt(5.0));
  if (!bias.defined()) return;
  const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  init::uniform_(bias, rng, -bound, bound);
}

// Rank and channels of a conv layer's input: (N, C_in, spatial...) with `rank` axes.
void check_input(const std::string& who, const Tensor& x, int rank, int64_t in_channels,
                 const char* layout) {
  if (x.rank() != rank || x.size(1) != in_channels)
    throw ShapeError(who + ": input " + x.shape().str() + " must be " + layout + " with C_in = " +
                     str(in_channels));
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Int2 k, Rng& rng, const Conv2dOptions& o, Dtype dtype)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_sizes(name(), in, out, std::min(k.h, k.w), o.groups, dtype);
  weight = Tensor(Shape{out, in / o.groups, k.h, k.w}, dtype);
  if (o.bias) bias = Tensor(Shape{out}, dtype);
  reset_parameters(weight, bias, rng);
  register_parameter("weight", weight);
  if (o.bias) register_parameter("bias", bias);
}

std::string Conv2d::name() const {
  return "Conv2d(" + str(in_channels) + ", " + str(out_channels) + ", (" + str(kernel_size.h) +
         ", " + str(kernel_size.w) + "))";
}

Tensor Conv2d::forward(const Tensor& x) const {
  check_input(name(), x, 4, in_channels, "(N, C_in, H, W)");
  return conv2d(x, weight, bias, options.stride, options.padding, options.dilation,
                options.groups);  // (N, C_out, H_out, W_out)
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Rng& rng, const Conv1dOptions& o, Dtype dtype)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_sizes(name(), in, out, k, o.groups, dtype);
  weight = Tensor(Shape{out, in / o.groups, k}, dtype);
  if (o.bias) bias = Tensor(Shape{out}, dtype);
  reset_parameters(weight, bias, rng);
  register_parameter("weight", weight);
  if (o.bias) register_parameter("bias", bias);
}

std::string Conv1d::name() const {
  return "Conv1d(" + str(in_channels) + ", " + str(out_channels) + ", " + str(kernel_size) + ")";
}

Tensor Conv1d::forward(const Tensor& x) const {
  check_input(name(), x, 3, in_channels, "(N, C_in, L)");
  return conv1d(x, weight, bias, options.stride, options.padding, options.dilation,
                options.groups);  // (N, C_out, L_out)
}

}  // namespace tg::nn
