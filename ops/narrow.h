#pragma once
#include <source_location>
#include <vector>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x[..., start:start+length, ...] along one axis (a copy): dx is dy placed back, zeros
/// elsewhere. Throws ShapeError for a bad axis or a range outside the axis.
Tensor narrow(const Tensor& x, int axis, int64_t start, int64_t length, const std::source_location& where = std::source_location::current());
/// Pieces of `size` along an axis (the last one shorter when it does not divide), as
/// torch.split(x, size, axis). Throws ShapeError for a bad axis, ValueError for size < 1.
std::vector<Tensor> split(const Tensor& x, int64_t size, int axis, const std::source_location& where = std::source_location::current());
/// Tensors joined along an axis; every other axis must agree. dx_i is dy's slice for x_i.
/// Throws ShapeError (no tensors, ranks or other axes differ, bad axis), ValueError (dtypes).
Tensor cat(const std::vector<Tensor>& xs, int axis, const std::source_location& where = std::source_location::current());
}  // namespace tg
