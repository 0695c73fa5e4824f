#pragma once
// The `reduction` argument of the losses (mse_loss, l1_loss, nll_loss,
// binary_cross_entropy_with_logits), as PyTorch's string: 'none', 'mean' (the default), 'sum'.

#include <cstdint>

#include <tapegrad/autograd/backward_fn.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {

enum class Reduction { none, mean, sum };

namespace detail {
/// Shapes of a loss's input and target that must be equal: ShapeError naming the op otherwise.
void check_loss_shapes(const char* op, const Tensor& x, const Tensor& y);
/// The checks of an elementwise loss of input x and target y (mse_loss, l1_loss): both float32
/// or both float64 (ValueError), of one shape (ShapeError), naming the op.
void check_pointwise_loss(const char* op, const Tensor& x, const Tensor& y);
/// The gradients of an elementwise loss of x - y, from dX: {dX, -dX}, each only where its tensor
/// requires grad.
Grads difference_grads(const Tensor& x, const Tensor& y, const Tensor& dX);
/// The elementwise losses E reduced: E itself (none), or a rank-0 sum or mean accumulated in
/// double (the mean of no elements is NaN, as PyTorch's).
Tensor reduce_loss(const Tensor& E, Reduction r);
/// The factor a reduction puts on every element's gradient: 1 / N for the mean, else 1.
inline double reduction_factor(Reduction r, int64_t numel) {
  return r == Reduction::mean ? 1.0 / double(numel) : 1.0;
}
}  // namespace detail

}  // namespace tg
