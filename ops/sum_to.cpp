// sum_to: Y = sum of X over the axes along which Y's shape broadcasts to X's;
// dX = broadcast_to(dY, X.shape)
// float32 accumulates in double (ops/accumulate.h): every broadcasting op's backward sums here.

#include <tapegrad/ops/sum_to.h>

#include <algorithm>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/broadcast_to.h>
#include <tapegrad/ops/op_util.h>

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
  detail::check_floating("sum_to", X);
  detail::check_defined("sum_to", X, "input");
  check_broadcasts("sum_to", shape, X.shape());
  if (X.shape() == shape) return X;
  Tensor Y = zeros(shape, X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    const int64_t n = X.numel(), m = shape.numel();
    if (m == 0) return;
    // Only leading axes summed (leading 1s of `shape` count as absent): X is (n / m, m) rows.
    int lead = 0;
    while (lead < shape.rank() && shape[lead] == 1) ++lead;
    bool suffix = true;
    for (int i = 1; i <= shape.rank() - lead; ++i)
      suffix = suffix && shape[shape.rank() - i] == X.shape()[X.rank() - i];
    if (suffix) {
      detail::sum_rows(px, n / m, m, py);
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
    std::vector<detail::Accum<T>> acc(m);
    int64_t k = 0;
    for (int64_t i0 = 0; i0 < d[0]; ++i0)
      for (int64_t i1 = 0; i1 < d[1]; ++i1)
        for (int64_t i2 = 0; i2 < d[2]; ++i2)
          for (int64_t i3 = 0; i3 < d[3]; ++i3)
            acc[i0 * t[0] + i1 * t[1] + i2 * t[2] + i3 * t[3]] += px[k++];
    std::copy(acc.begin(), acc.end(), py);
  });
  return record("sum_to", Y, {X}, where).formula([sX = X.shape()](const Tensor& dY) -> Grads {
    return {broadcast_to(dY, sX)};
  });
}

}  // namespace tg
