#pragma once
// Sums for the reducing ops (sum, sum_to, sum_of_squares; shared by the op sources, not API).
//
// float32 data is accumulated in double: a float running sum stops growing once its increments
// fall below half an ulp (2e7 float ones sum to 16777216 = 2^24). Blocks of kBlock values are
// cast to double in a small buffer and summed by Eigen, vectorised, so this costs no more time
// than a float sum (both are memory bound). double data is summed as it is.

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <tapegrad/ops/op_util.h>

namespace tg::detail {

template <class T>
using Accum = std::conditional_t<std::is_same_v<T, float>, double, T>;

constexpr int64_t kBlock = 256;

/// sum_i x_i over x[0, n), accumulated in Accum<T>; with `square`, sum_i x_i^2 (each square
/// taken in Accum<T> too).
template <class T>
Accum<T> accumulate(const T* x, int64_t n, bool square = false) {
  if constexpr (std::is_same_v<T, Accum<T>>) {
    const auto a = CMapArr<T>(x, n);
    return square ? a.square().sum() : a.sum();
  } else {
    Eigen::Array<Accum<T>, kBlock, 1> buf;
    Accum<T> total = 0;
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      auto b = buf.head(m);
      b = CMapArr<T>(x + i, m).template cast<Accum<T>>();
      total += square ? b.square().sum() : b.sum();
    }
    return total;
  }
}

/// y[c] = scale * sum_r x[r * cols + c]: the column sums of a row-major (rows, cols) block,
/// accumulated (and scaled) in Accum<T>.
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* y, Accum<T> scale = 1) {
  if (cols == 1) {
    y[0] = static_cast<T>(scale * accumulate(x, rows));
    return;
  }
  if constexpr (std::is_same_v<T, Accum<T>>) {
    auto acc = MapArr<T>(y, cols);
    acc.setZero();
    for (int64_t r = 0; r < rows; ++r) acc += CMapArr<T>(x + r * cols, cols);
    if (scale != 1) acc *= scale;
  } else {  // kColumns columns at a time, so the accumulator lives on the stack
    constexpr int64_t kColumns = 1024;
    Accum<T> acc[kColumns];
    for (int64_t c = 0; c < cols; c += kColumns) {
      const int64_t m = std::min(kColumns, cols - c);
      std::fill(acc, acc + m, Accum<T>(0));
      for (int64_t r = 0; r < rows; ++r) {  // vectorised by the compiler; Eigen 3.4's cast is not
        const T* row = x + r * cols + c;
        for (int64_t j = 0; j < m; ++j) acc[j] += row[j];
      }
      for (int64_t j = 0; j < m; ++j) y[c + j] = static_cast<T>(scale * acc[j]);
    }
  }
}

/// A reduction along one axis: X seen as (outer, n, inner), the output's shape, and the shape
/// with the axis kept as 1 (what the derivative broadcasts back from).
struct AxisReduction {
  Shape out, kept;
  int64_t outer = 1, n = 1, inner = 1;
};

/// Throws ShapeError naming `op` for a bad axis.
inline AxisReduction axis_reduction(const Shape& s, int axis, bool keepdim, const char* op) {
  const int ax = normalize_axis(axis, s, op);
  AxisReduction r;
  std::vector<int64_t> kept = s.vec(), dropped;
  kept[ax] = 1;
  for (int i = 0; i < s.rank(); ++i)
    if (i != ax) dropped.push_back(s[i]);
  r.kept = Shape(kept);
  r.out = keepdim ? r.kept : Shape(dropped);
  for (int i = 0; i < ax; ++i) r.outer *= s[i];
  for (int i = ax + 1; i < s.rank(); ++i) r.inner *= s[i];
  r.n = s[ax];
  return r;
}

/// y = scale * the sums of x over the reduction's axis.
template <class T>
void sum_axis(const T* x, const AxisReduction& r, T* y, Accum<T> scale = 1) {
  for (int64_t o = 0; o < r.outer; ++o)
    sum_rows(x + o * r.n * r.inner, r.n, r.inner, y + o * r.inner, scale);
}

}  // namespace tg::detail
