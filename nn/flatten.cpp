#include <tapegrad/nn/flatten.h>

#include <string>
#include <vector>

#include <tapegrad/ops/reshape.h>

namespace tg::nn {

Tensor Flatten::forward(const Tensor& x) const {
  const int64_t rank = x.rank();
  // A rank-0 tensor flattens as one of shape (1,), as PyTorch's.
  const int64_t axes = rank == 0 ? 1 : rank;
  const int64_t start = start_dim < 0 ? start_dim + axes : start_dim;
  const int64_t end = end_dim < 0 ? end_dim + axes : end_dim;
  if (start < 0 || start >= axes || end < 0 || end >= axes || start > end)
    throw ShapeError("Flatten(" + std::to_string(start_dim) + ", " + std::to_string(end_dim) +
                     "): input " + x.shape().str() + " has no axes " + std::to_string(start_dim) +
                     " .. " + std::to_string(end_dim) + " in order");
  if (rank == 0) return reshape(x, {1});
  std::vector<int64_t> shape;
  int64_t merged = 1;
  for (int64_t a = 0; a < rank; ++a) {
    if (a < start || a > end) {
      shape.push_back(x.size(static_cast<int>(a)));
      continue;
    }
    merged *= x.size(static_cast<int>(a));
    if (a == end) shape.push_back(merged);
  }
  return reshape(x, shape);  // (..., prod(start .. end), ...)
}

}  // namespace tg::nn
