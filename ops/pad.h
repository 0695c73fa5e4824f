#pragma once
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x with `value` added around its last axes, as F.pad(x, pads, value=value) (constant mode):
/// pads = (left, right) of the last axis, then (top, bottom) of the one before, ...; a negative
/// pad cuts entries off. Throws ShapeError (an odd count, more pairs than axes, a size below 0).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value = 0,
           const std::source_location& where = std::source_location::current());
}  // namespace tg
