#pragma once
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The mean of all elements, as a rank-0 tensor (NaN for an empty tensor, as PyTorch).
Tensor mean(const Tensor& x, const std::source_location& where = std::source_location::current());
/// The mean along one axis (negative counts from the end), kept as size 1 when keepdim.
/// Throws ShapeError for a bad axis.
Tensor mean(const Tensor& x, int axis, bool keepdim = false, const std::source_location& where = std::source_location::current());
/// The mean over several axes, as torch.mean(x, dims, keepdim): `mean(x, {0, 2}, true)`;
/// negative dims count from the end, and an empty std::vector means every axis (a bare `{}` or
/// `{d}` picks the one-axis form above). Throws ShapeError for a dim out of range or given
/// twice, ValueError for int64.
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim = false,
            const std::source_location& where = std::source_location::current());
}  // namespace tg
