#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Layer normalisation over the last axis, as torch.nn.functional.layer_norm(x, (C,), weight,
/// bias, eps): y = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance.
/// weight and bias are (C,) or undefined (then 1 and 0). A fused kernel; the formula is in ops.
/// Throws ShapeError (weight or bias not (C,), rank 0) or ValueError (dtypes differ, eps < 0).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  const std::source_location& where = std::source_location::current());
}  // namespace tg
