#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// log(sum(exp(x))) along an axis without overflow, as torch.logsumexp(x, dim, keepdim): -inf
/// for an axis of -inf entries (or an empty one), inf where an entry is inf. Throws ShapeError
/// (a bad axis) or ValueError (an int64 input).
Tensor logsumexp(const Tensor& x, int axis, bool keepdim = false,
                 const std::source_location& where = std::source_location::current());
}  // namespace tg
