// log_softmax: Y = X - max - log(sum(exp(X - max)));  dX = dY - exp(Y) sum(dY, -1)
// A fully masked row (max = -inf) is defined as all -inf with zero gradient: there exp(Y) = 0
// would pass dY straight through, so such rows are zeroed by a constant keep mask.

#include <tapegrad/ops/log_softmax.h>

#include <cmath>
#include <limits>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>

namespace tg {

namespace {

// (..., 1): 0 for the fully masked rows, 1 for the others; undefined when no row is masked.
Tensor live_rows(const Tensor& Y) {
  const int64_t n = Y.size(-1), rows = n ? Y.numel() / n : 0;
  std::vector<int64_t> kept = Y.shape().vec();
  kept.back() = 1;
  return dispatch(Y.dtype(), [&]<class T>() {
    const T* y = Y.data<T>();
    Tensor keep(Shape(kept), Y.dtype());
    T* k = keep.data<T>();
    bool any_dead = false;
    for (int64_t r = 0; r < rows; ++r) {
      k[r] = (detail::CMapArr<T>(y + r * n, n) == -std::numeric_limits<T>::infinity()).all() ? T(0)
                                                                                             : T(1);
      any_dead = any_dead || k[r] == T(0);
    }
    return any_dead ? keep : Tensor();
  });
}

}  // namespace

Tensor log_softmax(const Tensor& X, const std::source_location& where) {
  detail::check_floating("log_softmax", X);
  detail::check_min_rank("log_softmax", X, 1);
  Tensor Y(X.shape(), X.dtype());
  const int64_t n = X.size(-1), rows = n ? X.numel() / n : 0;
  dispatch(X.dtype(), [&]<class T>() {
    const T ninf = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      auto x = detail::CMapArr<T>(X.data<T>() + r * n, n);
      auto y = detail::MapArr<T>(Y.data<T>() + r * n, n);
      const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
      if (mx == ninf) {
        y.setConstant(ninf);
        continue;
      }
      // Masked entries add exactly 0 to the sum (Eigen's exp(-inf) is a denormal, not 0).
      const T lse = std::log((x == ninf).select(T(0), (x - mx).exp()).sum());
      y = (x - mx) - lse;  // -inf stays -inf; NaN or +inf in the row give NaN, as in PyTorch
    }
  });
  return record("log_softmax", Y, {X}, where)
      .formula([](const Tensor& dY, const Tensor& Y) -> Grads {
        const Tensor dX = sub(dY, mul(exp(Y), sum(dY, -1, true)));
        const Tensor keep = live_rows(Y);
        return {keep.defined() ? mul(dX, keep) : dX};
      })
      .kernel([](const Tensor& dY, const Tensor& Y) -> Grads {
        Tensor dX(Y.shape(), Y.dtype());
        const int64_t n = Y.size(-1), rows = n ? Y.numel() / n : 0;
        dispatch(Y.dtype(), [&]<class T>() {
          const T ninf = -std::numeric_limits<T>::infinity();
          for (int64_t r = 0; r < rows; ++r) {
            auto y = detail::CMapArr<T>(Y.data<T>() + r * n, n);
            auto dy = detail::CMapArr<T>(dY.data<T>() + r * n, n);
            auto dx = detail::MapArr<T>(dX.data<T>() + r * n, n);
            if ((y == ninf).all()) {
              dx.setZero();
              continue;
            }
            dx = dy - (y == ninf).select(T(0), y.exp()) * dy.sum();
          }
        });
        return {dX};
      });
}

}  // namespace tg
