#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Tensor.masked_fill(mask, value): X with `value` where mask (bool, broadcasting to X's shape)
/// holds. The gradient passes to X where mask does not hold. Throws ValueError (mask not bool, X
/// not float32/float64), ShapeError (mask does not broadcast to X's shape).
Tensor masked_fill(const Tensor& X, const Tensor& mask, double value,
                   const std::source_location& where = std::source_location::current());
}  // namespace tg
