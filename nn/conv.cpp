#include <tapegrad/nn/conv.h>

#include <cmath>
#include <utility>

#include <tapegrad/nn/init.h>

namespace tg::nn {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

ConvLayer::ConvLayer(std::string name, int64_t in, int64_t out, const std::vector<int64_t>& kernel,
                     int64_t groups, bool has_bias, Rng& rng, Dtype dtype)
    : in_channels(in), out_channels(out), name_(std::move(name)) {
  bool sizes_ok = in >= 1 && out >= 1 && groups >= 1;
  for (int64_t k : kernel) sizes_ok = sizes_ok && k >= 1;
  if (!sizes_ok) throw ValueError(name_ + ": channels, kernel size and groups must be at least 1");
  if (in % groups != 0 || out % groups != 0)
    throw ValueError(name_ + ": groups = " + str(groups) + " must divide in_channels and out_channels");
  if (!is_floating(dtype)) throw ValueError(name_ + ": the dtype must be float32 or float64");
  std::vector<int64_t> shape = {out, in / groups};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  // torch.nn's _ConvNd.reset_parameters: the weight by kaiming_uniform_(a = sqrt(5)), then the
  // bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  weight = Tensor(Shape(shape), dtype);
  init::kaiming_uniform_(weight, rng, std::sqrt(5.0));
  register_parameter("weight", weight);
  if (!has_bias) return;
  const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  bias = Tensor(Shape{out}, dtype);
  init::uniform_(bias, rng, -bound, bound);
  register_parameter("bias", bias);
}

void ConvLayer::check_input(const Tensor& x, int rank, const char* layout) const {
  if (x.rank() != rank || x.size(1) != in_channels)
    throw ShapeError(name_ + ": input " + x.shape().str() + " must be " + layout + " with C_in = " +
                     str(in_channels));
}

Conv2d::Conv2d(int64_t in, int64_t out, Int2 k, Rng& rng, const Conv2dOptions& o, Dtype dtype)
    : ConvLayer("Conv2d(" + str(in) + ", " + str(out) + ", (" + str(k.h) + ", " + str(k.w) + "))",
                in, out, {k.h, k.w}, o.groups, o.bias, rng, dtype),
      kernel_size(k), options(o) {}

Tensor Conv2d::forward(const Tensor& x) const {
  check_input(x, 4, "(N, C_in, H, W)");
  return conv2d(x, weight, bias, options.stride, options.padding, options.dilation,
                options.groups);  // (N, C_out, H_out, W_out)
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, Rng& rng, const Conv1dOptions& o, Dtype dtype)
    : ConvLayer("Conv1d(" + str(in) + ", " + str(out) + ", " + str(k) + ")", in, out, {k},
                o.groups, o.bias, rng, dtype),
      kernel_size(k), options(o) {}

Tensor Conv1d::forward(const Tensor& x) const {
  check_input(x, 3, "(N, C_in, L)");
  return conv1d(x, weight, bias, options.stride, options.padding, options.dilation,
                options.groups);  // (N, C_out, L_out)
}

}  // namespace tg::nn
