// The losses' shared pieces: the shape check and the reduction of elementwise losses.

#include <tapegrad/ops/loss_reduction.h>

#include <string>

#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>

namespace tg::detail {

void check_loss_shapes(const char* op, const Tensor& x, const Tensor& y) {
  if (!(x.shape() == y.shape()))
    throw ShapeError(std::string(op) + ": input " + x.shape().str() + " and target " +
                     y.shape().str() + " must have the same shape");
}

void check_pointwise_loss(const char* op, const Tensor& x, const Tensor& y) {
  check_floating(op, x);
  check_floating(op, y);
  check_same_dtype(op, x, y);
  check_loss_shapes(op, x, y);
}

Grads difference_grads(const Tensor& x, const Tensor& y, const Tensor& dX) {
  return {x.requires_grad() ? dX : Tensor(), y.requires_grad() ? scale(dX, -1.0) : Tensor()};
}

Tensor reduce_loss(const Tensor& E, Reduction r) {
  if (r == Reduction::none) return E;
  Tensor y(Shape{}, E.dtype());
  dispatch(E.dtype(), [&]<class T>() {
    const double s = CMapArr<T>(E.data<T>(), E.numel()).template cast<double>().sum();
    y.data<T>()[0] = T(r == Reduction::sum ? s : s / double(E.numel()));
  });
  return y;
}

}  // namespace tg::detail
