#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x without `axis` when its size is 1, else x unchanged, as torch.squeeze(x, dim). Throws
/// ShapeError for a bad axis.
Tensor squeeze(const Tensor& x, int axis, const std::source_location& where = std::source_location::current());
/// x without every axis of size 1, as torch.squeeze(x).
Tensor squeeze(const Tensor& x, const std::source_location& where = std::source_location::current());
/// x with a new axis of size 1 at `axis` in [-rank - 1, rank], as torch.unsqueeze. Throws
/// ShapeError for a bad axis or a result past rank 6.
Tensor unsqueeze(const Tensor& x, int axis, const std::source_location& where = std::source_location::current());
/// Axes start..end (negative counts from the end) merged into one, as torch.flatten; a scalar
/// becomes (1,). Throws ShapeError for a bad axis or start after end.
Tensor flatten(const Tensor& x, int start = 0, int end = -1,
               const std::source_location& where = std::source_location::current());
}  // namespace tg
