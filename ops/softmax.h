#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Softmax along `dim` (negative counts from the end; the last axis by default), as
/// torch.softmax(x, dim), stable (subtracts the max along dim). Entries of -inf get exactly 0;
/// a slice whose entries are all -inf gives all zeros and zero gradient, never NaN. NaN or +inf
/// in a slice propagate (the slice becomes NaN), as in PyTorch. Throws ShapeError for a rank-0
/// input or a dim outside [-rank, rank).
Tensor softmax(const Tensor& x, int dim = -1,
               const std::source_location& where = std::source_location::current());
}  // namespace tg
