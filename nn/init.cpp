#include <tapegrad/nn/init.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace tg::nn::init {

namespace {

std::string num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// x[i] = draw() for every entry in row-major order, converted to the tensor's float dtype.
template <class Draw>
Tensor& fill_floating(Tensor& t, const char* who, Draw draw) {
  if (!is_floating(t.dtype()))
    throw ValueError(std::string(who) + ": the tensor is int64; it fills float32 or float64");
  dispatch(t.dtype(), [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(draw());
  });
  return t;
}

int64_t fan(const Tensor& t, std::string_view mode) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (mode == "fan_in") return fan_in;
  if (mode == "fan_out") return fan_out;
  throw ValueError("kaiming: mode '" + std::string(mode) + "' is neither fan_in nor fan_out");
}

// The std of the two kaiming inits.
double kaiming_std(const Tensor& t, double a, std::string_view mode,
                   std::string_view nonlinearity) {
  const int64_t f = fan(t, mode);
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(f));
}

double xavier_std(const Tensor& t, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace

double calculate_gain(std::string_view nl, std::optional<double> param) {
  for (const char* linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                             "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    if (nl == linear) return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4.0;
  throw ValueError("calculate_gain: unsupported nonlinearity '" + std::string(nl) +
                   "' (linear, conv1d, conv2d, conv3d, conv_transpose1d, "
                   "conv_transpose2d, conv_transpose3d, sigmoid, tanh, relu, leaky_relu, selu)");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.rank() < 2)
    throw ValueError("calculate_fan_in_and_fan_out: a tensor of shape " + t.shape().str() +
                     " has fewer than 2 dimensions");
  int64_t receptive_field = 1;  // the kernel's elements, for a conv weight (out, in, k...)
  for (int a = 2; a < t.rank(); ++a) receptive_field *= t.size(a);
  return {t.size(1) * receptive_field, t.size(0) * receptive_field};
}

Tensor& uniform_(Tensor& t, Rng& rng, double a, double b) {
  if (!(a <= b)) throw ValueError("uniform_: a = " + num(a) + " must be <= b = " + num(b));
  return fill_floating(t, "uniform_", [&] { return rng.uniform(a, b); });
}

Tensor& normal_(Tensor& t, Rng& rng, double mean, double std) {
  if (!(std >= 0)) throw ValueError("normal_: std = " + num(std) + " must be >= 0");
  return fill_floating(t, "normal_", [&] { return mean + std * rng.normal(); });
}

Tensor& constant_(Tensor& t, double value) {
  if (t.dtype() == Dtype::i64) {
    std::fill(t.data<int64_t>(), t.data<int64_t>() + t.numel(), static_cast<int64_t>(value));
    return t;
  }
  return fill_floating(t, "constant_", [&] { return value; });
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& kaiming_uniform_(Tensor& t, Rng& rng, double a, std::string_view mode,
                         std::string_view nonlinearity) {
  if (t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return fill_floating(t, "kaiming_uniform_", [&] { return rng.uniform(-bound, bound); });
}

Tensor& kaiming_normal_(Tensor& t, Rng& rng, double a, std::string_view mode,
                        std::string_view nonlinearity) {
  if (t.numel() == 0) return t;
  const double std = kaiming_std(t, a, mode, nonlinearity);
  return fill_floating(t, "kaiming_normal_", [&] { return std * rng.normal(); });
}

Tensor& xavier_uniform_(Tensor& t, Rng& rng, double gain) {
  const double a = std::sqrt(3.0) * xavier_std(t, gain);
  if (t.numel() == 0) return t;
  return fill_floating(t, "xavier_uniform_", [&] { return rng.uniform(-a, a); });
}

Tensor& xavier_normal_(Tensor& t, Rng& rng, double gain) {
  const double std = xavier_std(t, gain);
  if (t.numel() == 0) return t;
  return fill_floating(t, "xavier_normal_", [&] { return std * rng.normal(); });
}

}  // namespace tg::nn::init
