#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The variance along an axis, sum((x - mean)^2) / (n - correction), as torch.var(x, dim,
/// correction=, keepdim=): correction 1 (Bessel's, the default) or 0 (the population variance),
/// or any other; n - correction <= 0 divides by 0 (inf, or NaN for 0 / 0), as PyTorch's.
/// Throws ShapeError (a bad axis) or ValueError (an int64 input, a negative correction).
Tensor var(const Tensor& x, int axis, double correction = 1, bool keepdim = false,
           const std::source_location& where = std::source_location::current());
}  // namespace tg
