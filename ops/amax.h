#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The largest entry along an axis, as torch.amax(x, dim, keepdim): NaN where the axis holds
/// one; the gradient is shared evenly between tied maxima (as PyTorch's). Throws ShapeError (a
/// bad axis, an empty axis) or ValueError (an int64 input).
Tensor amax(const Tensor& x, int axis, bool keepdim = false,
            const std::source_location& where = std::source_location::current());
/// The smallest entry along an axis, as torch.amin; see amax.
Tensor amin(const Tensor& x, int axis, bool keepdim = false,
            const std::source_location& where = std::source_location::current());
}  // namespace tg
