#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The sum of all elements, as a rank-0 tensor.
Tensor sum(const Tensor& x, const std::source_location& where = std::source_location::current());
/// The sum along one axis (negative counts from the end), kept as size 1 when keepdim.
/// Throws ShapeError for a bad axis.
Tensor sum(const Tensor& x, int axis, bool keepdim = false, const std::source_location& where = std::source_location::current());
}  // namespace tg
