#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Swaps the last two axes (a copy). Throws ShapeError below rank 2.
Tensor transpose(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
