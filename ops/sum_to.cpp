// sum_to: Y = sum of X over the axes along which Y's shape broadcasts to X's;
// dX = broadcast_to(dY, X.shape);  tY = sum_to(tX, Y.shape)
// float32 accumulates in double (ops/accumulate.h): every broadcasting op's backward sums here.

#include <tapegrad/ops/sum_to.h>

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
  if (X.shape() == shape) return X;  // (the backward's usual case: no broadcast)
  check_broadcasts("sum_to", shape, X.shape());
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
    // Else a sum over the axes where `shape` is 1 or absent, in one walk over X.
    detail::AxesReduction r;
    r.in = X.shape();
    r.out = shape;
    const int off = X.rank() - shape.rank();
    for (int i = 0; i < X.rank(); ++i) r.reduced[i] = i < off || shape[i - off] == 1;
    detail::sum_axes(px, r, py);
  });
  return record("sum_to", std::move(Y), {X}, where)
      .formula([sX = X.shape()](const Tensor& dY) -> Grads { return {broadcast_to(dY, sX)}; })
      .jvp([&](const Tangents& t) { return sum_to(t[0], shape); });
}

}  // namespace tg
