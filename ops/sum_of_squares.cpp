// sum_of_squares: y = sum_i X_i^2;  dX = 2 X dy;  ty = sum_i 2 X_i tX_i
// float32 accumulates in double (ops/accumulate.h).

#include <tapegrad/ops/sum_of_squares.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/sum.h>

namespace tg {

Tensor sum_of_squares(const Tensor& X, const std::source_location& where) {
  detail::check_floating("sum_of_squares", X);
  detail::check_defined("sum_of_squares", X, "input");
  Tensor y(Shape{}, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    y.data<T>()[0] = static_cast<T>(detail::accumulate(X.data<T>(), X.numel(), true));
  });
  return record("sum_of_squares", std::move(y), {X}, where)
      .saves(X)
      .formula([X](const Tensor& dy) -> Grads {
        return {mul(scale(X, 2.0), dy)};  // dy is rank 0 and broadcasts
      })
      .kernel([X](const Tensor& dy) -> Grads {  // the same products in one pass
        Tensor dX(X.shape(), X.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          const T g = dy.data<T>()[0];
          const T* x = X.data<T>();
          T* dx = dX.data<T>();
          for (int64_t i = 0, n = X.numel(); i < n; ++i) dx[i] = (x[i] * T(2)) * g;
        });
        return {dX};
      })
      .jvp([&](const Tangents& t) { return sum(mul(scale(X, 2.0), t[0])); });
}

}  // namespace tg
