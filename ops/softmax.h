#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Softmax along the last axis, stable (subtracts the row max). Entries of -inf get exactly 0;
/// a row whose entries are all -inf gives all zeros and zero gradient, never NaN. NaN or +inf in
/// a row propagate (the row becomes NaN), as in PyTorch. Throws
/// ShapeError for a rank-0 input.
Tensor softmax(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
