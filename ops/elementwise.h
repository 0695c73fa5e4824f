#pragma once
// The broadcasting loop behind add, sub and mul (not installed).

#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/strided_walk.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

/// out = f(a, b) elementwise with numpy broadcasting; the fast paths cover equal shapes and a
/// second operand that is a scalar or broadcasts over leading dimensions only, their entries
/// shared among the threads from kPassParallelFrom (f gives each entry alone, rounded once or
/// selected: the same bits on any team).
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
    for_parts(
        n,
        [&](int64_t i, int64_t e) {
          MapArr<T>(po + i, e - i) = f(CMapArr<T>(pa + i, e - i), CMapArr<T>(pb + i, e - i));
        },
        kPassParallelFrom);
    return out;
  }
  if (a.shape() == s && b.numel() == 1) {
    const T v = pb[0];
    for_parts(
        n,
        [&](int64_t i, int64_t e) {
          MapArr<T>(po + i, e - i) =
              f(CMapArr<T>(pa + i, e - i), Eigen::Array<T, Eigen::Dynamic, 1>::Constant(e - i, v));
        },
        kPassParallelFrom);
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
      for_parts(
          n / inner,
          [&](int64_t first, int64_t end) {
            for (int64_t o = first * inner; o < end * inner; o += inner)
              MapArr<T>(po + o, inner) = f(CMapArr<T>(pa + o, inner), CMapArr<T>(pb, inner));
          },
          pass_serial_below(inner));
      return out;
    }
  }
  // General case: a strided walk (size-1 axes dropped, contiguous ones merged), row by row.
  // Along a row each operand steps by 1 or, where it broadcasts, stays on one entry: a row is
  // one Eigen expression.
  const auto w = strided_walk<2>(s, {broadcast_strides(a.shape(), s), broadcast_strides(b.shape(), s)});
  const int64_t m = w.row_length();
  const bool step_a = w.row_stride(0) != 0, step_b = w.row_stride(1) != 0;
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  T* row_out = po;
  for_each_row(w, [&](const std::array<int64_t, 2>& at) {
    const T* x = pa + at[0];
    const T* y = pb + at[1];
    auto o = MapArr<T>(row_out, m);
    if (step_a && step_b)
      o = f(CMapArr<T>(x, m), CMapArr<T>(y, m));
    else if (step_a)
      o = f(CMapArr<T>(x, m), Arr::Constant(m, *y));
    else if (step_b)
      o = f(Arr::Constant(m, *x), CMapArr<T>(y, m));
    else  // every axis of size 1
      o = f(Arr::Constant(m, *x), Arr::Constant(m, *y));
    row_out += m;
  });
  return out;
}

}  // namespace tg::detail
