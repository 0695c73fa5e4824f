#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// log(softmax(x)) along the last axis, computed stably (x - max - log sum exp(x - max));
/// dx = dy - softmax(x) sum(dy). A fully masked row (all -inf) gives -inf and zero gradient.
Tensor log_softmax(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
