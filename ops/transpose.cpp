// transpose: Y[..., j, i] = X[..., i, j];  dX = transpose(dY)

#include <tapegrad/ops/transpose.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

Tensor transpose(const Tensor& X, const std::source_location& where) {
  detail::check_min_rank("transpose", X, 2);
  std::vector<int64_t> d = X.shape().vec();
  const int r = X.rank();
  const int64_t M = d[r - 2], N = d[r - 1], batch = X.numel() / (M * N > 0 ? M * N : 1);
  std::swap(d[r - 2], d[r - 1]);
  Tensor Y(Shape(d), X.dtype());
  if (M * N > 0) {
    dispatch(X.dtype(), [&]<class T>() {
      for (int64_t b = 0; b < batch; ++b)
        detail::MapMat<T>(Y.data<T>() + b * M * N, N, M) =
            detail::CMapMat<T>(X.data<T>() + b * M * N, M, N).transpose();  // (N, M)
    });
  }
  return record("transpose", Y, {X}, where).formula([](const Tensor& dY) -> Grads { return {transpose(dY)}; });
}

}  // namespace tg
