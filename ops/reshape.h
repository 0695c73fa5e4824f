#pragma once
#include <source_location>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The same elements in a new shape (shares storage; at most one -1, inferred). Throws
/// ShapeError when the element counts differ or the shape is invalid.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape, const std::source_location& where = std::source_location::current());
Tensor reshape(const Tensor& x, std::initializer_list<int64_t> shape, const std::source_location& where = std::source_location::current());
}  // namespace tg
