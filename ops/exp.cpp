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
    // Eigen's vectorised exp clamps its argument, so exp(-inf) would come out a denormal rather
    // than 0 and exp(1000) finite rather than inf: the few entries past the clamp take std::exp.
    // (A branch per entry took 4 times the exp itself: each block is checked first, branch-free.)
    // Blocks are shared among the threads from kPassParallelFrom entries.
    const T lo = std::is_same_v<T, float> ? T(-87) : T(-708), hi = -lo;
    constexpr int64_t kBlock = 1024;
    detail::for_parts(
        (n + kBlock - 1) / kBlock,
        [&](int64_t first, int64_t end) {
          for (int64_t b = first * kBlock; b < std::min(n, end * kBlock); b += kBlock) {
            const int64_t e = std::min(n, b + kBlock);
            detail::MapArr<T>(y + b, e - b) = detail::CMapArr<T>(x + b, e - b).exp();
            int outside = 0;  // (an int: a bool accumulator kept the loop scalar)
            for (int64_t i = b; i < e; ++i) outside |= !((x[i] > lo) & (x[i] < hi));
            if (!outside) continue;
            for (int64_t i = b; i < e; ++i)
              if (!(x[i] > lo && x[i] < hi)) y[i] = std::exp(x[i]);
          }
        },
        detail::pass_serial_below(kBlock));
  });
  return record("exp", std::move(Y), {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {mul(dY, Y)}; })
      .jvp([](const Tangents& t, const Tensor& Y) { return mul(t[0], Y); });
}

}  // namespace tg
