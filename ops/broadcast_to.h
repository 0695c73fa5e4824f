#pragma once
#include <source_location>
#include <tapegrad/autograd/shape.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Repeats x along broadcast axes to `shape` (numpy broadcasting). Throws ShapeError when x does
/// not broadcast to `shape`.
Tensor broadcast_to(const Tensor& x, const Shape& shape, const std::source_location& where = std::source_location::current());
}  // namespace tg
