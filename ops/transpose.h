#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Swaps axes dim0 and dim1 (negative counts from the end), as torch.transpose(x, dim0, dim1),
/// as a copy; by default the last two axes. Swapping the last two is the fast path; any other
/// pair is recorded as the permute it is. Throws ShapeError for a dim outside [-rank, rank)
/// (so below rank 2 for the default).
Tensor transpose(const Tensor& x, int dim0 = -2, int dim1 = -1,
                 const std::source_location& where = std::source_location::current());
}  // namespace tg
