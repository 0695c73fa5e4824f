// gather:      Y[p] = X[p with p_axis replaced by index[p]]        (p over index's shape)
//   dX = scatter_add(zeros(X.shape), axis, index, dY);  tY = gather(tX, axis, index)
// scatter_add: Y = X;  Y[p with p_axis replaced by index[p]] += S[p]  (S of index's shape)
//   dX = dY,  dS = gather(dY, axis, index);  tY = scatter_add(tX, axis, index, tS) (linear in
//   both: a missing tangent counts as zeros)
// Each is the other's derivative (the index is a constant), so both are differentiable to any
// order. max / min along an axis, index_select and the pools' backward lean on this pair.

#include <tapegrad/ops/gather.h>

#include <array>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

// Checks index against x (see gather.h) and returns x's axis in 0..rank-1.
int check_index(const char* op, const Tensor& X, int axis, const Tensor& index) {
  const std::string o = op;
  detail::check_floating(op, X);
  detail::check_defined(op, index, "index");
  if (index.dtype() != Dtype::i64)
    throw ValueError(o + ": index must be int64, got " + dtype_name(index.dtype()) + " of shape " +
                     index.shape().str());
  const int ax = normalize_axis(axis, X.shape(), op);
  if (index.rank() != X.rank())
    throw ShapeError(o + ": index must have the input's rank: index " + index.shape().str() +
                     " for input " + X.shape().str());
  for (int d = 0; d < X.rank(); ++d)
    if (d != ax && index.shape()[d] > X.shape()[d])
      throw ShapeError(o + ": index " + index.shape().str() + " is larger than input " +
                       X.shape().str() + " in dimension " + std::to_string(d) + " (axis " +
                       std::to_string(ax) + ")");
  const int64_t n = X.shape()[ax];
  const int64_t* ix = index.data<int64_t>();
  for (int64_t k = 0; k < index.numel(); ++k)
    if (ix[k] < 0 || ix[k] >= n)
      throw ShapeError(o + ": index " + std::to_string(ix[k]) + " at " + index.shape().index_str(k) +
                       " is out of range for axis " + std::to_string(ax) + " of size " +
                       std::to_string(n) + " (input " + X.shape().str() + ")");
  return ax;
}

// Calls f(k, off) for every element k of index (row-major) with off the flat offset in X of
// the element it names.
template <class F>
void for_each_target(const Shape& xs, const Tensor& index, int ax, F f) {
  const Shape& is = index.shape();
  const int r = is.rank();
  std::array<int64_t, kMaxRank> stride{}, pos{};
  for (int64_t d = r - 1, s = 1; d >= 0; --d) {
    stride[d] = s;
    s *= xs[static_cast<int>(d)];
  }
  const int64_t* ix = index.data<int64_t>();
  for (int64_t k = 0, n = is.numel(); k < n; ++k) {
    int64_t off = 0;
    for (int d = 0; d < r; ++d) off += (d == ax ? ix[k] : pos[d]) * stride[d];
    f(k, off);
    for (int d = r - 1; d >= 0 && ++pos[d] == is[d]; --d) pos[d] = 0;  // next multi-index
  }
}

}  // namespace

Tensor gather(const Tensor& X, int axis, const Tensor& index, const std::source_location& where) {
  const int ax = check_index("gather", X, axis, index);
  Tensor Y(index.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    for_each_target(X.shape(), index, ax, [&](int64_t k, int64_t off) { y[k] = x[off]; });
  });
  return record("gather", std::move(Y), {X}, where)
      .saves(index)
      .formula([sX = X.shape(), ax, index, where](const Tensor& dY) -> Grads {
        return {scatter_add(zeros(sX, dY.dtype()), ax, index, dY, where)};
      })
      .jvp([&](const Tangents& t) { return gather(t[0], ax, index, where); });
}

Tensor scatter_add(const Tensor& X, int axis, const Tensor& index, const Tensor& S,
                   const std::source_location& where) {
  const int ax = check_index("scatter_add", X, axis, index);
  detail::check_same_dtype("scatter_add", X, S);
  if (S.shape() != index.shape())
    throw ShapeError("scatter_add: src must have index's shape: src " + S.shape().str() +
                     ", index " + index.shape().str() + " (input " + X.shape().str() + ")");
  Tensor Y = X.detach().clone();
  dispatch(X.dtype(), [&]<class T>() {
    const T* s = S.data<T>();
    T* y = Y.data<T>();
    for_each_target(X.shape(), index, ax, [&](int64_t k, int64_t off) { y[off] += s[k]; });
  });
  return record("scatter_add", std::move(Y), {X, S}, where)
      .saves(index)
      .formula([ax, index, where, gx = X.requires_grad(), gs = S.requires_grad()](const Tensor& dY) -> Grads {
        return {gx ? dY : Tensor(), gs ? gather(dY, ax, index, where) : Tensor()};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        if (!t[1].defined()) return t[0];
        const Tensor tX = t[0].defined() ? t[0] : zeros(Y.shape(), Y.dtype());
        return scatter_add(tX, ax, index, t[1], where);
      });
}

}  // namespace tg
