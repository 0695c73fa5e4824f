// exp: Y = e^X;  dX = dY * Y;  tY = tX * Y

#include <tapegrad/ops/exp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/threads.h>

namespace tg {

Tensor exp(const Tensor& X, const std::source_location& where) {
  detail::check_floating("exp", X);
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t n = X.numel();
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    // By blocks, shared among the threads from kPassParallelFrom entries (detail::exp_into:
    // Eigen's vectorised exp, glibc's past its clamp).
    constexpr int64_t kBlock = 1024;
    detail::for_parts(
        (n + kBlock - 1) / kBlock,
        [&](int64_t first, int64_t end) {
          const int64_t b = first * kBlock, e = std::min(n, end * kBlock);
          detail::exp_into(x + b, y + b, e - b);
        },
        detail::pass_serial_below(kBlock));
  });
  return record("exp", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {mul(dY, Y)}; })
      .jvp([](const Tangents& t, const Tensor& Y) { return mul(t[0], Y); });
}

}  // namespace tg
