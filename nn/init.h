#pragma once
// nn::init, as torch.nn.init: fills a tensor's data in place, off the tape (a write through
// data<T>(), which bumps its version), drawing from an Rng in row-major order. A zero-element
// tensor is left alone (PyTorch warns; nothing is drawn). Each returns its tensor.
//
//   kaiming: std = gain / sqrt(fan), uniform on +-sqrt(3) std;  gain = calculate_gain(nl, a)
//   xavier:  std = gain * sqrt(2 / (fan_in + fan_out)),  uniform on +-sqrt(3) std
//   fans of a weight (out, in, k...): fan_in = in * prod(k), fan_out = out * prod(k)

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include <tapegrad/autograd/tensor.h>

namespace tg::nn::init {

/// The recommended gain of a nonlinearity, as torch.nn.init.calculate_gain: 1 for linear,
/// conv1d/2d/3d, conv_transpose1d/2d/3d and sigmoid; 5/3 for tanh; sqrt(2) for relu;
/// sqrt(2 / (1 + slope^2)) for leaky_relu (param = slope, 0.01 when none; the others ignore
/// param); 3/4 for selu. Throws ValueError for another name.
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

/// (fan_in, fan_out) of a weight (out, in, kernel...), as torch.nn.init's
/// _calculate_fan_in_and_fan_out. Throws ValueError for rank < 2.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// U(a, b). Throws ValueError for an int64 tensor or a > b.
Tensor& uniform_(Tensor& tensor, Rng& rng, double a = 0.0, double b = 1.0);
/// N(mean, std^2). Throws ValueError for an int64 tensor or std < 0.
Tensor& normal_(Tensor& tensor, Rng& rng, double mean = 0.0, double std = 1.0);
/// Every entry `value` (any dtype).
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);

/// He init, uniform: U(-bound, bound), bound = gain * sqrt(3 / fan) with fan by `mode`
/// ("fan_in" or "fan_out") and gain = calculate_gain(nonlinearity, a). Throws ValueError for
/// rank < 2, another mode, or a nonlinearity calculate_gain refuses.
Tensor& kaiming_uniform_(Tensor& tensor, Rng& rng, double a = 0.0, std::string_view mode = "fan_in",
                         std::string_view nonlinearity = "leaky_relu");
/// He init, normal: N(0, std^2), std = gain / sqrt(fan). Throws as kaiming_uniform_.
Tensor& kaiming_normal_(Tensor& tensor, Rng& rng, double a = 0.0, std::string_view mode = "fan_in",
                        std::string_view nonlinearity = "leaky_relu");
/// Glorot init, uniform: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)). Throws ValueError
/// for rank < 2.
Tensor& xavier_uniform_(Tensor& tensor, Rng& rng, double gain = 1.0);
/// Glorot init, normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& tensor, Rng& rng, double gain = 1.0);

}  // namespace tg::nn::init
