// broadcast_to: Y[i] = X[i with broadcast axes set to 0];  dX = sum_to(dY, X.shape);
//   tY = broadcast_to(tX, Y.shape)
// expand: broadcast_to with -1 sizes replaced by X's own.

#include <tapegrad/ops/broadcast_to.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/strided_walk.h>
#include <tapegrad/ops/sum_to.h>

namespace tg {

Tensor broadcast_to(const Tensor& X, const Shape& shape, const std::source_location& where) {
  detail::check_floating("broadcast_to", X);
  detail::check_defined("broadcast_to", X, "input");
  if (broadcast_shapes(X.shape(), shape, "broadcast_to") != shape)
    throw ShapeError("broadcast_to: shape " + X.shape().str() + " does not broadcast to " +
                     shape.str());
  if (X.shape() == shape) return X;
  Tensor Y(shape, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    const int64_t n = shape.numel(), m = X.numel();
    bool suffix = true;
    for (int i = 1; i <= X.rank(); ++i)
      suffix = suffix && X.shape()[X.rank() - i] == shape[shape.rank() - i];
    if (suffix && m > 0) {
      // X once, then what is written so far copied after itself: n / m copies in about
      // log2(n / m) memcpy calls. (One call per copy of a scalar, sum's gradient spread over
      // the LSTM benchmark's (64, 32, 256) output, took 1.6% of that benchmark's time.)
      if (n == 0) return;  // an empty Y, (0, ...): nothing to write
      std::memcpy(py, px, m * sizeof(T));
      for (int64_t done = m; done < n; done += std::min(done, n - done))
        std::memcpy(py + done, py, std::min(done, n - done) * sizeof(T));
      return;
    }
    // A strided walk over Y: each row of X copied, or one entry of X repeated along a row.
    const auto w = detail::strided_walk<1>(shape, {broadcast_strides(X.shape(), shape)});
    const int64_t row = w.row_length();
    const bool repeat = w.row_stride(0) == 0;
    detail::for_each_row(w, [&](const std::array<int64_t, 1>& at) {
      const T* x = px + at[0];
      if (repeat)
        std::fill(py, py + row, *x);
      else  // a loop, not memcpy: short rows are copied faster inline
        for (int64_t j = 0; j < row; ++j) py[j] = x[j];
      py += row;
    });
  });
  return record("broadcast_to", std::move(Y), {X}, where)
      .formula([sX = X.shape()](const Tensor& dY) -> Grads { return {sum_to(dY, sX)}; })
      .jvp([&](const Tangents& t) { return broadcast_to(t[0], shape); });
}

Tensor expand(const Tensor& X, const std::vector<int64_t>& sizes, const std::source_location& where) {
  detail::check_defined("expand", X, "input");
  const int r = X.rank(), n = static_cast<int>(sizes.size());
  if (n < r)
    throw ShapeError("expand: " + std::to_string(n) + " sizes for input " + X.shape().str() +
                     " of rank " + std::to_string(r));
  std::vector<int64_t> s = sizes;
  for (int i = 0; i < n; ++i) {
    if (s[i] != -1) continue;
    if (i < n - r)
      throw ShapeError("expand: size -1 at " + std::to_string(i) + " is a new axis for input " +
                       X.shape().str() + " (sizes of " + std::to_string(n) + " axes)");
    s[i] = X.shape()[i - (n - r)];
  }
  const Shape target(s);
  if (broadcast_shapes(X.shape(), target, "expand") != target)
    throw ShapeError("expand: shape " + X.shape().str() + " does not expand to " + target.str());
  return broadcast_to(X, target, where);
}

}  // namespace tg
