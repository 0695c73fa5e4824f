#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// min(max(x, lo), hi) elementwise, as torch.clamp(x, lo, hi); -inf or inf leaves that side open.
/// The gradient passes where lo <= x <= hi, the bounds included, as PyTorch's. Throws ValueError
/// (an int64 tensor, lo > hi, a NaN bound).
Tensor clamp(const Tensor& x, double lo, double hi,
             const std::source_location& where = std::source_location::current());
}  // namespace tg
