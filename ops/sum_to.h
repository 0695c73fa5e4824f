#pragma once
#include <source_location>
#include <tapegrad/autograd/shape.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Sums x down to `shape`, the inverse of broadcasting: every axis that `shape` broadcasts along
/// is summed. The backward of every broadcasting op. Throws ShapeError when `shape` does not
/// broadcast to x's shape.
Tensor sum_to(const Tensor& x, const Shape& shape, const std::source_location& where = std::source_location::current());
}  // namespace tg
