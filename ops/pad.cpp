// pad: Y[i] = X[i - lo] where i - lo lies inside X, else value (lo, hi the pads of each axis);
//   dX = pad(dY, -pads, 0): Y's entries that came from X, cut back out (and 0 for entries a
//   negative pad cut off). The derivative is pad again, so pad is differentiable to any order.
//   tY = pad(tX, pads, 0): the padding value is a constant.

#include <tapegrad/ops/pad.h>

#include <array>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

std::string pads_str(const std::vector<int64_t>& p) {
  std::string s = "(";
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + (p.size() == 1 ? ",)" : ")");
}

}  // namespace

Tensor pad(const Tensor& X, const std::vector<int64_t>& pads, double value,
           const std::source_location& where) {
  detail::check_floating("pad", X);
  const int r = X.rank();
  if (pads.size() % 2 != 0 || pads.size() / 2 > static_cast<std::size_t>(r))
    throw ShapeError("pad: pads " + pads_str(pads) + " must be pairs, at most one for each axis of " +
                     X.shape().str());
  std::array<int64_t, kMaxRank> lo{};
  std::vector<int64_t> out = X.shape().vec();
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const int d = r - 1 - static_cast<int>(k);
    lo[d] = pads[2 * k];
    int64_t both;
    if (__builtin_add_overflow(pads[2 * k], pads[2 * k + 1], &both) ||
        __builtin_add_overflow(out[d], both, &out[d]))
      throw ShapeError("pad: pads " + pads_str(pads) + " make axis " + std::to_string(d) + " of " +
                       X.shape().str() + " larger than int64 counts");
    if (out[d] < 0)
      throw ShapeError("pad: pads " + pads_str(pads) + " leave axis " + std::to_string(d) +
                       " of " + X.shape().str() + " with size " + std::to_string(out[d]));
  }
  Tensor Y(Shape(out), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    std::array<int64_t, kMaxRank> stride{}, pos{};
    for (int d = r - 1; d >= 0; --d) stride[d] = d == r - 1 ? 1 : stride[d + 1] * X.shape()[d + 1];
    for (int64_t k = 0, n = Y.numel(); k < n; ++k) {
      int64_t off = 0;
      bool inside = true;
      for (int d = 0; d < r && inside; ++d) {
        const int64_t i = pos[d] - lo[d];
        inside = i >= 0 && i < X.shape()[d];
        off += i * stride[d];
      }
      y[k] = inside ? x[off] : static_cast<T>(value);
      for (int d = r - 1; d >= 0 && ++pos[d] == out[d]; --d) pos[d] = 0;  // next multi-index
    }
  });
  std::vector<int64_t> back(pads.size());
  for (std::size_t k = 0; k < pads.size(); ++k) back[k] = -pads[k];
  return record("pad", std::move(Y), {X}, where)
      .formula([back, where](const Tensor& dY) -> Grads { return {pad(dY, back, 0, where)}; })
      .jvp([&](const Tangents& t) { return pad(t[0], pads, 0, where); });
}

}  // namespace tg
