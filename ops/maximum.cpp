// maximum: Y = A > B ? A : B (broadcasting);  dA = sum_to(dY * M_A, A.shape),  dB = sum_to(dY * M_B, B.shape)
//   M_A = 1 where A > B, 1/2 where A = B, 0 where A < B;  M_B = 1 - M_A (both 1 where one is NaN,
//   as PyTorch's masks). The masks are constants: their own derivative is 0.
//   tY = tA * M_A + tB * M_B (broadcast to Y.shape)

#include <tapegrad/ops/maximum.h>

#include <tapegrad/ops/elementwise.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/pick.h>

namespace tg {

namespace {

// Where the gradient of `first` goes in first maximum second: 1, 1/2 at ties, 0 where the other wins.
Tensor max_share(const Tensor& first, const Tensor& second) {
  return dispatch(first.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("maximum", first, second, [](auto x, auto y) {
      return (x < y).select(T(0), T(1) - (x == y).template cast<T>() * T(0.5));
    });
  });
}

}  // namespace

Tensor maximum(const Tensor& A, const Tensor& B, const std::source_location& where) {
  detail::check_floating("maximum", A);
  detail::check_floating("maximum", B);
  Tensor Y = dispatch(A.dtype(), [&]<class T>() {
    return detail::broadcast_binary<T>("maximum", A, B, [](auto x, auto y) {
      return (x > y || x != x).select(x, y);  // NaN in either wins, as PyTorch's
    });
  });
  return detail::record_pick("maximum", Y, A, B, max_share, where);
}

}  // namespace tg
