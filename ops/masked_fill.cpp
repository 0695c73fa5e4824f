// masked_fill: Y = mask ? value : X (mask broadcast to X's shape);  dX = where(mask, 0, dY);
//   tY = where(mask, 0, tX).
// The mask is a constant: no gradient.

#include <tapegrad/ops/masked_fill.h>

#include <array>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/broadcast_walk.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/where.h>

namespace tg {

Tensor masked_fill(const Tensor& X, const Tensor& mask, double value,
                   const std::source_location& where_) {
  detail::check_floating("masked_fill", X);
  detail::check_defined("masked_fill", mask, "mask");
  if (mask.dtype() != Dtype::b8)
    throw ValueError("masked_fill: mask must be a bool tensor (a comparison's), got " +
                     std::string(dtype_name(mask.dtype())) + " of shape " + mask.shape().str());
  if (!(broadcast_shapes(mask.shape(), X.shape(), "masked_fill") == X.shape()))
    throw ShapeError("masked_fill: mask " + mask.shape().str() + " does not broadcast to X's shape " +
                     X.shape().str());
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const bool* pm = mask.data<bool>();
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    const T v = static_cast<T>(value);
    detail::broadcast_walk<1>(X.shape(), {mask.shape()}, [&](int64_t k, const auto& off) {
      py[k] = pm[off[0]] ? v : px[k];
    });
  });
  return record("masked_fill", std::move(Y), {X}, where_)
      .saves(mask)
      .formula([mask](const Tensor& dY) -> Grads { return {where(mask, 0.0, dY)}; })
      .jvp([&](const Tangents& t) { return where(mask, 0.0, t[0]); });
}

}  // namespace tg
