#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Y[i][j][k] = X[index[i][j][k]][j][k] for axis 0 (likewise for the others), as torch.gather:
/// index is int64 of X's rank, index.size(d) <= X.size(d) for every d != axis, and Y has
/// index's shape. Throws ShapeError (ranks, sizes, an index outside [0, X.size(axis)), a bad
/// axis) or ValueError (X not floating, index not int64).
Tensor gather(const Tensor& x, int axis, const Tensor& index,
              const std::source_location& where = std::source_location::current());
/// Y = X, then Y[index[i][j][k]][j][k] += src[i][j][k] for axis 0, as torch.scatter_add with
/// src of index's shape (PyTorch also takes a larger src and ignores the rest; this does not).
/// Throws as gather does, and ShapeError when src's shape is not index's, ValueError when the
/// dtypes of X and src differ.
Tensor scatter_add(const Tensor& x, int axis, const Tensor& index, const Tensor& src,
                   const std::source_location& where = std::source_location::current());
}  // namespace tg
