// softmax: Y = exp(X - max) / sum(exp(X - max));  dX = Y * (dY - sum(dY * Y, -1))
// A fully masked row (max = -inf) is defined as all zeros; then Y = 0 makes dX = 0 as well.

#include <tapegrad/ops/softmax.h>

#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>

namespace tg {

Tensor softmax(const Tensor& X, const std::source_location& where) {
  detail::check_min_rank("softmax", X, 1);
  Tensor Y(X.shape(), X.dtype());
  const int64_t n = X.size(-1), rows = n ? X.numel() / n : 0;
  dispatch(X.dtype(), [&]<class T>() {
    for (int64_t r = 0; r < rows; ++r) {
      auto x = detail::CMapArr<T>(X.data<T>() + r * n, n);
      auto y = detail::MapArr<T>(Y.data<T>() + r * n, n);
      const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
      if (std::isnan(mx)) {  // NaN in, NaN out: the whole row, as IEEE arithmetic would have it
        y.setConstant(std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      if (mx == -std::numeric_limits<T>::infinity()) {
        y.setZero();
        continue;
      }
      // Eigen's vectorised exp clamps its argument and returns a denormal for -inf, so masked
      // entries are set to exactly 0 here rather than trusted to underflow.
      const T ninf = -std::numeric_limits<T>::infinity();
      y = (x == ninf).select(T(0), (x - mx).exp());
      y /= y.sum();
    }
  });
  return record("softmax", Y, {X}, where).formula([](const Tensor& dY, const Tensor& Y) -> Grads {
    return {mul(Y, sub(dY, sum(mul(dY, Y), -1, true)))};
  });
}

}  // namespace tg
