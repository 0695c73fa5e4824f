#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Rows of weight (V, C) picked by int64 indices of any shape (rank <= 5): the output has the
/// indices' shape plus C. Backward adds dY's rows into the rows they came from. Throws
/// ShapeError (weight not rank 2, result rank > 6), ValueError (indices not int64, an index
/// outside [0, V)).
Tensor embedding(const Tensor& indices, const Tensor& weight, const std::source_location& where = std::source_location::current());
}  // namespace tg
