#pragma once
#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// A (T, T) weight matrix as text: one shade per entry from ' ' (0) to '@' (1), '.' for a tiny
/// nonzero, with row and column indices. Throws ShapeError unless the tensor is 2-D.
std::string heatmap(const Tensor& A);
}  // namespace tg
