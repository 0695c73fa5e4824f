// reshape: Y = X viewed in a new shape;  dX = reshape(dY, X.shape)

#include "ops/reshape.h"

#include "autograd/node.h"
#include "ops/op_util.h"

namespace tg {

namespace {
std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}
}  // namespace

Tensor reshape(const Tensor& X, const std::vector<int64_t>& shape, const std::source_location& where) {
  detail::check_defined("reshape", X, "input");
  std::vector<int64_t> d = shape;
  int infer = -1;
  int64_t known = 1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (d[i] < 0) {
      throw ShapeError("reshape: invalid target shape " + dims_str(shape) + " for input " +
                       X.shape().str());
    } else {
      known *= d[i];
    }
  }
  if (d.size() > static_cast<std::size_t>(kMaxRank))
    throw ShapeError("reshape: target shape " + dims_str(shape) + " has rank above 4");
  if (infer >= 0) {
    if (known == 0 || X.numel() % known != 0)
      throw ShapeError("reshape: cannot view input " + X.shape().str() + " as " +
                       dims_str(shape));
    d[infer] = X.numel() / known;
    known *= d[infer];
  }
  if (known != X.numel())
    throw ShapeError("reshape: cannot view input " + X.shape().str() + " (" +
                     std::to_string(X.numel()) + " elements) as " + dims_str(shape));
  Tensor Y = X.detach();
  Y.impl().shape = Shape(d);
  return record("reshape", Y, {X}, [sX = X.shape()](const Tensor& dY) -> Grads {
    return {reshape(dY, sX.vec())};
  }, where);
}

}  // namespace tg
