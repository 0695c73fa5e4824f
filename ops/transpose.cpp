// transpose: Y = X with axes dim0 and dim1 swapped, e.g. Y[..., j, i] = X[..., i, j];
//   dX = transpose(dY, dim0, dim1);  tY = transpose(tX, dim0, dim1)

#include <tapegrad/ops/transpose.h>

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/permute.h>

namespace tg {

namespace {

int transpose_axis(int dim, const Tensor& X) {
  const int r = X.rank();
  if (dim < -r || dim >= r)
    throw ShapeError("transpose: dim " + std::to_string(dim) + " is out of range for shape " +
                     X.shape().str() + " (dims must lie in [-" + std::to_string(r) + ", " +
                     std::to_string(r) + "))");
  return dim < 0 ? dim + r : dim;
}

}  // namespace

Tensor transpose(const Tensor& X, int dim0, int dim1, const std::source_location& where) {
  detail::check_floating("transpose", X);
  detail::check_defined("transpose", X, "input");
  const int r = X.rank(), a = transpose_axis(dim0, X), b = transpose_axis(dim1, X);
  if (std::min(a, b) != r - 2 || std::max(a, b) != r - 1) {
    std::vector<int> perm(r);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[a], perm[b]);
    return permute(X, perm, where);
  }
  std::vector<int64_t> d = X.shape().vec();
  const int64_t M = d[r - 2], N = d[r - 1], batch = X.numel() / (M * N > 0 ? M * N : 1);
  std::swap(d[r - 2], d[r - 1]);
  Tensor Y(Shape(d), X.dtype());
  if (M * N > 0) {
    dispatch(X.dtype(), [&]<class T>() {
      for (int64_t k = 0; k < batch; ++k)
        detail::MapMat<T>(Y.data<T>() + k * M * N, N, M) =
            detail::CMapMat<T>(X.data<T>() + k * M * N, M, N).transpose();  // (N, M)
    });
  }
  return record("transpose", std::move(Y), {X}, where)
      .formula([](const Tensor& dY) -> Grads { return {transpose(dY)}; })
      .jvp([](const Tangents& t) { return transpose(t[0]); });
}

}  // namespace tg
