#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The entries of x at `index` (int64, rank 0 or 1, values in [0, x.size(axis))) along an axis,
/// as torch.index_select: the axis gets index.numel() entries. Throws ShapeError (a bad axis, an
/// index of rank 2 or more or out of range) or ValueError (x not floating, index not int64).
Tensor index_select(const Tensor& x, int axis, const Tensor& index,
                    const std::source_location& where = std::source_location::current());
}  // namespace tg
