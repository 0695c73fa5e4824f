// where: Y = cond ? A : B (cond, A, B broadcast to Y's shape)
//   dA = sum_to(where(cond, dY, 0), A.shape),  dB = sum_to(where(cond, 0, dY), B.shape)
//   tY = where(cond, tA, tB) (0 for an input without a tangent; broadcast to Y's shape)
// cond is a constant: no gradient.

#include <tapegrad/ops/where.h>

#include <array>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/broadcast_walk.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>

namespace tg {

namespace {

void check_mask(const char* op, const Tensor& mask, const char* name) {
  detail::check_defined(op, mask, name);
  if (mask.dtype() != Dtype::b8)
    throw ValueError(std::string(op) + ": " + name + " must be a bool tensor (a comparison's), got " +
                     dtype_name(mask.dtype()) + " of shape " + mask.shape().str());
}

}  // namespace

Tensor where(const Tensor& cond, const Tensor& A, const Tensor& B,
             const std::source_location& where_) {
  check_mask("where", cond, "cond");
  detail::check_floating("where", A);
  detail::check_floating("where", B);
  detail::check_same_dtype("where", A, B);
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), A.shape(), "where"), B.shape(),
                                   "where");
  Tensor Y(s, A.dtype());
  dispatch(A.dtype(), [&]<class T>() {
    const bool* pc = cond.data<bool>();
    const T* pa = A.data<T>();
    const T* pb = B.data<T>();
    T* py = Y.data<T>();
    detail::broadcast_walk<3>(s, {cond.shape(), A.shape(), B.shape()},
                              [&](int64_t k, const auto& off) {
                                py[k] = pc[off[0]] ? pa[off[1]] : pb[off[2]];
                              });
  });
  return record("where", std::move(Y), {A, B}, where_)
      .saves(cond)
      .formula([cond, A, B](const Tensor& dY) -> Grads {
        const Tensor zero = scalar(0.0, dY.dtype());
        return {A.requires_grad() ? sum_to(where(cond, dY, zero), A.shape()) : Tensor(),
                B.requires_grad() ? sum_to(where(cond, zero, dY), B.shape()) : Tensor()};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        const Tensor zero = scalar(0.0, Y.dtype());
        return detail::tangent_to(
            where(cond, t[0].defined() ? t[0] : zero, t[1].defined() ? t[1] : zero), Y.shape());
      });
}

Tensor where(const Tensor& cond, const Tensor& A, double value, const std::source_location& w) {
  detail::check_floating("where", A);
  return where(cond, A, scalar(value, A.dtype()), w);
}

Tensor where(const Tensor& cond, double value, const Tensor& B, const std::source_location& w) {
  detail::check_floating("where", B);
  return where(cond, scalar(value, B.dtype()), B, w);
}

}  // namespace tg
