#pragma once
// The broadcasting loop behind add, sub and mul (not installed).

#include <tapegrad/ops/op_util.h>

namespace tg::detail {

/// out = f(a, b) elementwise with numpy broadcasting; the fast paths cover equal shapes and a
/// second operand that is a scalar or broadcasts over leading dimensions only.
template <class T, class F>
Tensor broadcast_binary(const char* op, const Tensor& a, const Tensor& b, F f) {
  check_same_dtype(op, a, b);
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out(s, a.dtype());
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  const int64_t n = s.numel();
  if (a.shape() == b.shape()) {
    MapArr<T>(po, n) = f(CMapArr<T>(pa, n), CMapArr<T>(pb, n));
    return out;
  }
  if (a.shape() == s && b.numel() == 1) {
    const T v = pb[0];
    MapArr<T>(po, n) = f(CMapArr<T>(pa, n), Eigen::Array<T, Eigen::Dynamic, 1>::Constant(n, v));
    return out;
  }
  if (a.shape() == s && b.numel() > 0 && n % b.numel() == 0) {
    // b equals the trailing dims of s (after dropping its leading 1s): repeat it block by block.
    bool suffix = true;
    int64_t inner = 1;
    for (int i = 1; i <= b.rank(); ++i) {
      if (b.shape()[b.rank() - i] != s[s.rank() - i]) suffix = false;
      inner *= s[s.rank() - i];
    }
    if (suffix) {
      for (int64_t o = 0; o < n; o += inner)
        MapArr<T>(po + o, inner) = f(CMapArr<T>(pa + o, inner), CMapArr<T>(pb, inner));
      return out;
    }
  }
  // General case: four nested loops over the padded output shape.
  Shape s4 = s;
  auto sa = broadcast_strides(a.shape(), s), sb = broadcast_strides(b.shape(), s);
  std::array<int64_t, kMaxRank> d{1, 1, 1, 1}, ta{}, tb{};
  const int off = kMaxRank - s4.rank();
  for (int i = 0; i < s4.rank(); ++i) {
    d[off + i] = s4[i];
    ta[off + i] = sa[i];
    tb[off + i] = sb[i];
  }
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < d[0]; ++i0)
    for (int64_t i1 = 0; i1 < d[1]; ++i1)
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3) {
          const int64_t ia = i0 * ta[0] + i1 * ta[1] + i2 * ta[2] + i3 * ta[3];
          const int64_t ib = i0 * tb[0] + i1 * tb[1] + i2 * tb[2] + i3 * tb[3];
          Eigen::Array<T, 1, 1> x, y;
          x(0) = pa[ia];
          y(0) = pb[ib];
          po[k++] = Eigen::Array<T, 1, 1>(f(x, y))(0);
        }
  return out;
}

}  // namespace tg::detail
