// embedding: Y[k, :] = W[idx[k], :];  dW = zeros (V, C), then dW[idx[k], :] += dY[k, :] for each k
// That index_add is its own op, "embedding_backward", whose derivative is embedding again
// (d(dY)[k, :] = ddW[idx[k], :]), so both directions are twice differentiable.
// Both are linear: tY = embedding(idx, tW), and embedding_backward's is embedding_backward of
// the tangent.

#include <tapegrad/ops/embedding.h>

#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

Tensor embedding_backward(const Tensor& dY, const Tensor& indices, int64_t V,
                          const std::source_location& where);

// Rows of dW (V, C) summed from dY's rows (indices.numel(), C), off the tape.
Tensor index_add(const Tensor& dY, const Tensor& indices, int64_t V) {
  const int64_t C = dY.size(-1), K = indices.numel();
  Tensor dW = zeros({V, C}, dY.dtype());
  dispatch(dY.dtype(), [&]<class T>() {
    const int64_t* idx = indices.data<int64_t>();
    const T* dy = dY.data<T>();
    T* dw = dW.data<T>();
    for (int64_t k = 0; k < K; ++k)
      detail::MapArr<T>(dw + idx[k] * C, C) += detail::CMapArr<T>(dy + k * C, C);
  });
  return dW;
}

Tensor embedding_backward(const Tensor& dY, const Tensor& indices, int64_t V,
                          const std::source_location& where) {
  Tensor dW = index_add(dY, indices, V);
  return record("embedding_backward", std::move(dW), {dY}, where)
      .saves(indices)
      .formula([indices](const Tensor& ddW) -> Grads { return {embedding(indices, ddW)}; })
      .jvp([&](const Tangents& t) {
        return embedding_backward(t[0], indices, V, where);
      });
}

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& W, const std::source_location& where) {
  detail::check_defined("embedding", indices, "indices");
  detail::check_defined("embedding", W, "weight");
  if (indices.dtype() != Dtype::i64)
    throw ValueError("embedding: indices must be int64, got " +
                     std::string(dtype_name(indices.dtype())) + " of shape " +
                     indices.shape().str());
  if (!is_floating(W.dtype()))
    throw ValueError("embedding: weight must be float32 or float64, got int64 of shape " +
                     W.shape().str());
  if (W.rank() != 2)
    throw ShapeError("embedding: weight must be (V, C), got shape " + W.shape().str());
  if (indices.rank() >= kMaxRank)
    throw ShapeError("embedding: indices of shape " + indices.shape().str() +
                     " would give a result of rank " + std::to_string(indices.rank() + 1) +
                     " (at most " + std::to_string(kMaxRank) + ")");
  const int64_t V = W.size(0), C = W.size(1), K = indices.numel();
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t k = 0; k < K; ++k)
    if (idx[k] < 0 || idx[k] >= V)
      throw ValueError("embedding: index " + std::to_string(idx[k]) + " at position " +
                       std::to_string(k) + " is outside [0, " + std::to_string(V) +
                       ") for weight of shape " + W.shape().str());
  std::vector<int64_t> dims = indices.shape().vec();
  dims.push_back(C);
  Tensor Y{Shape(dims), W.dtype()};  // (..., C)
  dispatch(W.dtype(), [&]<class T>() {
    const T* w = W.data<T>();
    T* y = Y.data<T>();
    for (int64_t k = 0; k < K; ++k)
      detail::MapArr<T>(y + k * C, C) = detail::CMapArr<T>(w + idx[k] * C, C);
  });
  return record("embedding", std::move(Y), {W}, where)
      .saves(indices)
      .formula([indices, V, where](const Tensor& dY) -> Grads {
        return {embedding_backward(dY, indices, V, where)};
      })
      .jvp([&](const Tangents& t) { return embedding(indices, t[0], where); });
}

}  // namespace tg
