// sum_to: Y = sum of X over the axes along which Y's shape broadcasts to X's;
// dX = broadcast_to(dY, X.shape)

#include "ops/sum_to.h"

#include "autograd/node.h"
#include "ops/broadcast_to.h"
#include "ops/op_util.h"

namespace tg {

namespace {
void check_broadcasts(const char* op, const Shape& small, const Shape& big) {
  bool ok = small.rank() <= big.rank();
  for (int i = 1; ok && i <= small.rank(); ++i) {
    const int64_t s = small[small.rank() - i], b = big[big.rank() - i];
    ok = s == b || s == 1;
  }
  if (!ok)
    throw ShapeError(std::string(op) + ": shape " + small.str() + " does not broadcast to " +
                     big.str());
}
}  // namespace

Tensor sum_to(const Tensor& X, const Shape& shape, const std::source_location& where) {
  detail::check_defined("sum_to", X, "input");
  check_broadcasts("sum_to", shape, X.shape());
  if (X.shape() == shape) return X;
  Tensor Y = zeros(shape, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    const int64_t n = X.numel(), m = shape.numel();
    bool suffix = true;  // only leading axes are summed: add up whole blocks
    for (int i = 1; i <= shape.rank(); ++i)
      suffix = suffix && shape[shape.rank() - i] == X.shape()[X.rank() - i];
    if (suffix && m > 0) {
      auto acc = detail::MapArr<T>(py, m);
      for (int64_t o = 0; o < n; o += m) acc += detail::CMapArr<T>(px + o, m);
      return;
    }
    const Shape& s = X.shape();
    auto st = broadcast_strides(shape, s);
    std::array<int64_t, kMaxRank> d{1, 1, 1, 1}, t{};
    const int off = kMaxRank - s.rank();
    for (int i = 0; i < s.rank(); ++i) {
      d[off + i] = s[i];
      t[off + i] = st[i];
    }
    int64_t k = 0;
    for (int64_t i0 = 0; i0 < d[0]; ++i0)
      for (int64_t i1 = 0; i1 < d[1]; ++i1)
        for (int64_t i2 = 0; i2 < d[2]; ++i2)
          for (int64_t i3 = 0; i3 < d[3]; ++i3)
            py[i0 * t[0] + i1 * t[1] + i2 * t[2] + i3 * t[3]] += px[k++];
  });
  return record("sum_to", Y, {X}, where).formula([sX = X.shape()](const Tensor& dY) -> Grads {
    return {broadcast_to(dY, sX)};
  });
}

}  // namespace tg
