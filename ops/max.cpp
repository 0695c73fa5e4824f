// max along an axis: Y[o, i] = X[o, k*, i] with k* = the index PyTorch picks (the first maximum,
//   the first NaN), X seen as (outer, n, inner);
//   dX = scatter_add(zeros(X.shape), axis, k* kept as 1, dY kept as 1): dY goes to k* alone;
//   tY = gather(tX, axis, k* kept as 1), with the kept axis dropped as Y's.
// min likewise with the smallest entry. argmax / argmin return k* (int64, not differentiable).
// The scatter's derivative is a gather at k* (ops/gather.cpp), so max is twice differentiable.

#include <tapegrad/ops/max.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/gather.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>

namespace tg {

namespace {

// k* for every (outer, inner) position into idx (the output's layout), as PyTorch's reduction:
// a NaN beats everything but an earlier NaN; an equal value does not replace the earlier one.
template <class T>
void arg_reduce(const T* x, const detail::AxisReduction& r, bool largest, int64_t* idx) {
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) {
      const T* row = x + o * r.n * r.inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < r.n && !std::isnan(row[best * r.inner]); ++k) {
        const T v = row[k * r.inner], b = row[best * r.inner];
        if (std::isnan(v) || (largest ? v > b : v < b)) best = k;
      }
      idx[o * r.inner + i] = best;
    }
}

detail::AxisReduction checked_reduction(const char* op, const Tensor& X, int axis, bool keepdim,
                                        bool largest) {
  detail::check_floating(op, X);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), axis, keepdim, op);
  if (r.n == 0)
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " of shape " +
                     X.shape().str() + " is empty (no " + (largest ? "largest" : "smallest") +
                     " entry)");
  return r;
}

ValuesIndices extreme(const char* op, const Tensor& X, int axis, bool keepdim, bool largest,
                      const std::source_location& where) {
  const detail::AxisReduction r = checked_reduction(op, X, axis, keepdim, largest);
  Tensor idx(r.out, Dtype::i64), Y(r.out, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    int64_t* k = idx.data<int64_t>();
    arg_reduce(x, r, largest, k);
    T* y = Y.data<T>();
    for (int64_t o = 0; o < r.outer; ++o)
      for (int64_t i = 0; i < r.inner; ++i)
        y[o * r.inner + i] = x[(o * r.n + k[o * r.inner + i]) * r.inner + i];
  });
  const int ax = normalize_axis(axis, X.shape(), op);
  const Tensor kept_idx = reshape(idx, r.kept.vec());
  Tensor values = record(op, std::move(Y), {X}, where)
      .saves(idx)
      .formula([sX = X.shape(), kept = r.kept, ax, kept_idx, where](const Tensor& dY) -> Grads {
        return {scatter_add(zeros(sX, dY.dtype()), ax, kept_idx, reshape(dY, kept.vec()), where)};
      })
      .jvp([&, out = r.out](const Tangents& t) {
        return reshape(gather(t[0], ax, kept_idx, where), out.vec());
      });
  return {values, idx};
}

Tensor flat_index(const char* op, const Tensor& X, bool largest) {
  detail::check_floating(op, X);
  return detail::extreme_indices(op, reshape(X.detach(), {-1}), 0, false, largest);
}

}  // namespace

Tensor detail::extreme_indices(const char* op, const Tensor& X, int axis, bool keepdim, bool largest) {
  const detail::AxisReduction r = checked_reduction(op, X, axis, keepdim, largest);
  Tensor idx(r.out, Dtype::i64);
  dispatch(X.dtype(), [&]<class T>() { arg_reduce(X.data<T>(), r, largest, idx.data<int64_t>()); });
  return idx;
}

ValuesIndices max(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  return extreme("max", X, axis, keepdim, true, where);
}
ValuesIndices min(const Tensor& X, int axis, bool keepdim, const std::source_location& where) {
  return extreme("min", X, axis, keepdim, false, where);
}
Tensor argmax(const Tensor& X, int axis, bool keepdim) {
  return detail::extreme_indices("argmax", X, axis, keepdim, true);
}
Tensor argmin(const Tensor& X, int axis, bool keepdim) {
  return detail::extreme_indices("argmin", X, axis, keepdim, false);
}
Tensor argmax(const Tensor& X) { return flat_index("argmax", X, true); }
Tensor argmin(const Tensor& X) { return flat_index("argmin", X, false); }

}  // namespace tg
