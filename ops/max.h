#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// The result of max / min along an axis, as torch.return_types.max.
struct ValuesIndices {
  Tensor values;   // the input's dtype
  Tensor indices;  // int64, where along the axis each value was found
};

/// The largest entry along an axis and its index, as torch.max(x, dim, keepdim): the first
/// maximum at ties, the first NaN where there is one. The gradient goes to that index only.
/// Throws ShapeError (a bad axis, an empty axis) or ValueError (an int64 input).
ValuesIndices max(const Tensor& x, int axis, bool keepdim = false,
                  const std::source_location& where = std::source_location::current());
/// The smallest entry along an axis and its index, as torch.min(x, dim, keepdim); see max.
ValuesIndices min(const Tensor& x, int axis, bool keepdim = false,
                  const std::source_location& where = std::source_location::current());
/// max(x, axis, keepdim).indices (int64, never on the tape), as torch.argmax.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);
/// The index of the largest entry of the flattened x (rank 0, int64), as torch.argmax(x).
Tensor argmax(const Tensor& x);
/// min(x, axis, keepdim).indices, as torch.argmin.
Tensor argmin(const Tensor& x, int axis, bool keepdim = false);
/// The index of the smallest entry of the flattened x, as torch.argmin(x).
Tensor argmin(const Tensor& x);

namespace detail {
/// The indices of max (largest) or min along an axis, with the checks of `op` (an int64 input,
/// a bad or empty axis): what amax and amin build on.
Tensor extreme_indices(const char* op, const Tensor& x, int axis, bool keepdim, bool largest);
}  // namespace detail

}  // namespace tg
