#pragma once
#include <source_location>
#include <vector>

#include <tapegrad/autograd/shape.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Repeats x along broadcast axes to `shape` (numpy broadcasting). Throws ShapeError when x does
/// not broadcast to `shape`.
Tensor broadcast_to(const Tensor& x, const Shape& shape, const std::source_location& where = std::source_location::current());
/// broadcast_to under torch's name and arguments, as Tensor.expand: a size of -1 keeps x's own
/// (new leading axes take no -1). Throws ShapeError as broadcast_to does, or for a -1 that has
/// no axis of x to keep.
Tensor expand(const Tensor& x, const std::vector<int64_t>& sizes,
              const std::source_location& where = std::source_location::current());
}  // namespace tg
