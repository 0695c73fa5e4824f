// index_select: Y[..., j, ...] = X[..., index[j], ...] along the axis
//   = gather(X, axis, G) with G[..., j, ...] = index[j] of Y's shape;
//   dX = scatter_add(zeros(X.shape), axis, G, dY) (gather's derivative: repeated indices add up).

#include <tapegrad/ops/index_select.h>

#include <string>
#include <vector>

#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/gather.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor index_select(const Tensor& X, int axis, const Tensor& index, const std::source_location& where) {
  detail::check_floating("index_select", X);
  detail::check_defined("index_select", index, "index");
  if (index.dtype() != Dtype::i64)
    throw ValueError(std::string("index_select: index must be int64, got ") +
                     dtype_name(index.dtype()) + " of shape " + index.shape().str());
  if (index.rank() > 1)
    throw ShapeError("index_select: index must have rank 0 or 1, got shape " + index.shape().str() +
                     " for input " + X.shape().str());
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, true, "index_select");
  const int64_t m = index.numel();
  const int64_t* ix = index.data<int64_t>();
  for (int64_t j = 0; j < m; ++j)
    if (ix[j] < 0 || ix[j] >= r.n)
      throw ShapeError("index_select: index " + std::to_string(ix[j]) + " at " + std::to_string(j) +
                       " is out of range for axis " + std::to_string(axis) + " of size " +
                       std::to_string(r.n) + " (input " + X.shape().str() + ")");
  std::vector<int64_t> out = X.shape().vec();
  out[normalize_axis(axis, X.shape(), "index_select")] = m;
  std::vector<int64_t> g(static_cast<std::size_t>(r.outer * m * r.inner));
  for (int64_t o = 0, k = 0; o < r.outer; ++o)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t i = 0; i < r.inner; ++i) g[k++] = ix[j];
  return gather(X, axis, from_indices(g, Shape(out)), where);
}

}  // namespace tg
