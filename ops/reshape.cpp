// reshape: Y = X viewed in a new shape;  dX = reshape(dY, X.shape);  tY = reshape(tX, Y.shape)

#include <tapegrad/ops/reshape.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

std::string dims_str(const int64_t* d, std::size_t n) {
  std::string s = "(";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (n == 1 ? ",)" : ")");
}

Tensor reshape_to(const Tensor& X, const int64_t* shape, std::size_t n,
                  const std::source_location& where) {
  detail::check_defined("reshape", X, "input");
  if (n > static_cast<std::size_t>(kMaxRank))
    throw ShapeError("reshape: target shape " + dims_str(shape, n) + " has rank " +
                     std::to_string(n) + "; at most " + std::to_string(kMaxRank) + " is supported");
  int64_t d[kMaxRank];
  int infer = -1;
  int64_t known = 1;
  for (std::size_t i = 0; i < n; ++i) {
    d[i] = shape[i];
    if (d[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (d[i] < 0) {
      throw ShapeError("reshape: invalid target shape " + dims_str(shape, n) + " for input " +
                       X.shape().str());
    } else {
      known *= d[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || X.numel() % known != 0)
      throw ShapeError("reshape: cannot view input " + X.shape().str() + " as " +
                       dims_str(shape, n));
    d[infer] = X.numel() / known;
    known *= d[infer];
  }
  if (known != X.numel())
    throw ShapeError("reshape: cannot view input " + X.shape().str() + " (" +
                     std::to_string(X.numel()) + " elements) as " + dims_str(shape, n));
  Tensor Y = X.detach();
  Y.impl().shape = Shape(d, static_cast<int>(n));
  return record("reshape", std::move(Y), {X}, where)
      .formula([sX = X.shape()](const Tensor& dY) -> Grads {
        int64_t back[kMaxRank];
        for (int i = 0; i < sX.rank(); ++i) back[i] = sX[i];
        return {reshape_to(dY, back, sX.rank(), std::source_location::current())};
      })
      .jvp([](const Tangents& t, const Tensor& Y) { return reshape(t[0], Y.shape().vec()); });
}

}  // namespace

Tensor reshape(const Tensor& X, const std::vector<int64_t>& shape,
               const std::source_location& where) {
  return reshape_to(X, shape.data(), shape.size(), where);
}

Tensor reshape(const Tensor& X, std::initializer_list<int64_t> shape,
               const std::source_location& where) {
  return reshape_to(X, shape.begin(), shape.size(), where);
}

}  // namespace tg
