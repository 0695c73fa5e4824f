#pragma once
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Tensors of one shape joined along a new axis in [-rank - 1, rank], as torch.stack. Throws
/// ShapeError (no tensors, shapes differ, bad axis), ValueError (dtypes differ).
Tensor stack(const std::vector<Tensor>& xs, int axis = 0,
             const std::source_location& where = std::source_location::current());
/// x cut into n pieces along an axis, as torch.chunk: pieces of ceil(size / n), the last one
/// shorter, so there may be fewer than n (an empty axis gives n empty pieces). Throws
/// ShapeError (bad axis), ValueError (n < 1).
std::vector<Tensor> chunk(const Tensor& x, int64_t n, int axis = 0,
                          const std::source_location& where = std::source_location::current());
}  // namespace tg
