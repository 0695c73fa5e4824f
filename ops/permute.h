#pragma once
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Reorders the axes: output axis i is input axis perm[i] (a copy). Throws ShapeError when perm
/// is not a permutation of 0..rank-1.
Tensor permute(const Tensor& x, const std::vector<int>& perm, const std::source_location& where = std::source_location::current());
}  // namespace tg
