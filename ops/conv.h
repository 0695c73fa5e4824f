#pragma once
#include <cstdint>
#include <source_location>
#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// A stride, padding, dilation or kernel size of a 2-D op: one int for both axes, or {h, w}
/// (PyTorch's int-or-pair arguments).
struct Int2 {
  int64_t h, w;
  Int2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch's int argument
  Int2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  /// For messages: "(2, 1)" for a 2-D op (spatial 2), "2" for a 1-D one (whose pair is (1, v)).
  std::string str(int spatial) const;
};

/// torch.nn.functional.conv2d: X (N, C_in, H, W), W (C_out, C_in / groups, kH, kW), b (C_out)
/// or undefined for no bias; gives (N, C_out, H_out, W_out) with H_out = (H + 2 pH - dH (kH - 1)
/// - 1) / sH + 1 (likewise W_out). Throws ShapeError (wrong rank, channels that do not match,
/// a kernel larger than the padded input, groups not dividing the channels) or ValueError
/// (stride or dilation below 1, negative padding, groups below 1, int64 or mixed dtypes).
Tensor conv2d(const Tensor& X, const Tensor& W, const Tensor& b, Int2 stride = 1, Int2 padding = 0,
              Int2 dilation = 1, int64_t groups = 1,
              const std::source_location& where = std::source_location::current());

/// torch.nn.functional.conv1d: X (N, C_in, L), W (C_out, C_in / groups, k), b (C_out) or
/// undefined; gives (N, C_out, L_out), L_out = (L + 2 p - d (k - 1) - 1) / s + 1. Throws as
/// conv2d does, naming conv1d.
Tensor conv1d(const Tensor& X, const Tensor& W, const Tensor& b, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1,
              const std::source_location& where = std::source_location::current());

}  // namespace tg
