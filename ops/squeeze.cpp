// squeeze, unsqueeze, flatten: Y = reshape(X, the new shape);  dX = reshape(dY, X.shape)
// (recorded as the reshape they are, which shares X's storage).

#include <tapegrad/ops/squeeze.h>

#include <string>
#include <vector>

#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>

namespace tg {

Tensor squeeze(const Tensor& X, int axis, const std::source_location& where) {
  detail::check_defined("squeeze", X, "input");
  if (X.rank() == 0 && (axis == 0 || axis == -1)) return X;  // as PyTorch's: a scalar has dim 0
  const int ax = normalize_axis(axis, X.shape(), "squeeze");
  if (X.shape()[ax] != 1) return X;
  std::vector<int64_t> s = X.shape().vec();
  s.erase(s.begin() + ax);
  return reshape(X, s, where);
}

Tensor squeeze(const Tensor& X, const std::source_location& where) {
  detail::check_defined("squeeze", X, "input");
  std::vector<int64_t> s;
  for (int64_t d : X.shape().vec())
    if (d != 1) s.push_back(d);
  return reshape(X, s, where);
}

Tensor unsqueeze(const Tensor& X, int axis, const std::source_location& where) {
  detail::check_defined("unsqueeze", X, "input");
  const int r = X.rank();
  if (axis < -r - 1 || axis > r)
    throw ShapeError("unsqueeze: axis " + std::to_string(axis) + " is out of range [" +
                     std::to_string(-r - 1) + ", " + std::to_string(r) + "] for shape " +
                     X.shape().str());
  if (r == kMaxRank)
    throw ShapeError("unsqueeze: shape " + X.shape().str() + " would become rank " +
                     std::to_string(r + 1) + "; at most " + std::to_string(kMaxRank) +
                     " is supported");
  std::vector<int64_t> s = X.shape().vec();
  s.insert(s.begin() + (axis < 0 ? axis + r + 1 : axis), 1);
  return reshape(X, s, where);
}

Tensor flatten(const Tensor& X, int start, int end, const std::source_location& where) {
  detail::check_defined("flatten", X, "input");
  if (X.rank() == 0) {
    if (start != 0 && start != -1) throw_axis_error(start, X.shape(), "flatten");
    if (end != 0 && end != -1) throw_axis_error(end, X.shape(), "flatten");
    return reshape(X, {1}, where);
  }
  const int a = normalize_axis(start, X.shape(), "flatten"), b = normalize_axis(end, X.shape(), "flatten");
  if (a > b)
    throw ShapeError("flatten: start " + std::to_string(start) + " comes after end " +
                     std::to_string(end) + " for shape " + X.shape().str());
  std::vector<int64_t> s;
  int64_t merged = 1;
  for (int i = 0; i < X.rank(); ++i) {
    if (i < a || i > b) s.push_back(X.shape()[i]);
    else merged *= X.shape()[i];
    if (i == b) s.push_back(merged);
  }
  return reshape(X, s, where);
}

}  // namespace tg
