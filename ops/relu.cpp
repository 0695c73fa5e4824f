// relu: Y = max(X, 0);  dX = dY * [X > 0];  tY = tX * [X > 0]  (the step is a constant: its own
// derivative is 0)

#include <tapegrad/ops/relu.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

// [Y > 0]: a constant of the formula and the rule.
Tensor step(const Tensor& Y) {
  Tensor s(Y.shape(), Y.dtype());
  dispatch(Y.dtype(), [&]<class T>() {
    const int64_t n = Y.numel();
    detail::MapArr<T>(s.data<T>(), n) =
        (detail::CMapArr<T>(Y.data<T>(), n) > T(0)).template cast<T>();
  });
  return s;
}

}  // namespace

Tensor relu(const Tensor& X, const std::source_location& where) {
  detail::check_floating("relu", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    detail::for_parts(X.numel(), [&](int64_t b, int64_t e) {
      auto xs = detail::CMapArr<T>(x + b, e - b);
      detail::MapArr<T>(y + b, e - b) = (xs <= T(0)).select(T(0), xs);  // NaN stays NaN
    });
  });
  // Y > 0 exactly where X > 0, so the output alone tells where the gradient passes.
  return record("relu", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {mul(dY, step(Y))}; })
      .kernel([](const Tensor& dY, const Tensor& Y) -> Grads {
        Tensor dX(Y.shape(), Y.dtype());
        dispatch(Y.dtype(), [&]<class T>() {
          const T *y = Y.data<T>(), *dy = dY.data<T>();
          T* dx = dX.data<T>();
          detail::for_parts(Y.numel(), [&](int64_t b, int64_t e) {
            detail::MapArr<T>(dx + b, e - b) = (detail::CMapArr<T>(y + b, e - b) > T(0))
                                                   .select(detail::CMapArr<T>(dy + b, e - b), T(0));
          });
        });
        return {dX};
      })
      .jvp([](const Tangents& t, const Tensor& Y) { return mul(t[0], step(Y)); });
}

}  // namespace tg
