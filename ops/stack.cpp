// stack: Y = cat(unsqueeze(X_i, axis) for every i, axis);  dX_i = the slice i of dY along axis
// chunk: split(X, ceil(X.size(axis) / n), axis);           dX = cat of the pieces' dY
// Both are the ops they are written with (cat, split, reshape), so their derivatives are those.

#include <tapegrad/ops/stack.h>

#include <string>

#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/squeeze.h>

namespace tg {

Tensor stack(const std::vector<Tensor>& xs, int axis, const std::source_location& where) {
  if (xs.empty()) throw ShapeError("stack: needs at least one tensor, got none");
  for (std::size_t i = 0; i < xs.size(); ++i) {
    detail::check_defined("stack", xs[i], "input");
    if (xs[i].shape() != xs[0].shape())
      throw ShapeError("stack: every tensor must have the same shape, got " + xs[0].shape().str() +
                       " (tensor 0) and " + xs[i].shape().str() + " (tensor " + std::to_string(i) + ")");
    detail::check_same_dtype("stack", xs[0], xs[i]);
  }
  const int r = xs[0].rank();
  if (axis < -r - 1 || axis > r)
    throw ShapeError("stack: axis " + std::to_string(axis) + " is out of range [" +
                     std::to_string(-r - 1) + ", " + std::to_string(r) + "] for tensors of shape " +
                     xs[0].shape().str());
  std::vector<Tensor> parts;
  for (const Tensor& x : xs) parts.push_back(unsqueeze(x, axis, where));
  return cat(parts, axis, where);
}

std::vector<Tensor> chunk(const Tensor& X, int64_t n, int axis, const std::source_location& where) {
  detail::check_defined("chunk", X, "input");
  if (n < 1)
    throw ValueError("chunk: needs at least 1 piece, got " + std::to_string(n) + " for shape " +
                     X.shape().str());
  const int ax = normalize_axis(axis, X.shape(), "chunk");
  const int64_t size = X.shape()[ax];
  if (size == 0) return std::vector<Tensor>(static_cast<std::size_t>(n), narrow(X, ax, 0, 0, where));
  return split(X, (size + n - 1) / n, ax, where);
}

}  // namespace tg
