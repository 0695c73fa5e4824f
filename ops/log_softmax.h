#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// log(softmax(x)) along `dim` (negative counts from the end; the last axis by default), as
/// torch.log_softmax(x, dim), computed stably (x - max - log sum exp(x - max));
/// dx = dy - softmax(x) sum(dy, dim). A fully masked slice (all -inf) gives -inf and zero
/// gradient. Throws ShapeError for a rank-0 input or a dim outside [-rank, rank), ValueError for
/// int64.
Tensor log_softmax(const Tensor& x, int dim = -1,
                   const std::source_location& where = std::source_location::current());
}  // namespace tg
