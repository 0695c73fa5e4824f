#pragma once
// Sums for the reducing ops (sum, sum_to, sum_of_squares; shared by the op sources, not API).
//
// float32 data is accumulated in double: a float running sum stops growing once its increments
// fall below half an ulp (2e7 float ones sum to 16777216 = 2^24). Blocks of kBlock values are
// cast to double in a small buffer and summed by Eigen, vectorised, so this costs no more time
// than a float sum (both are memory bound). double data is summed as it is.

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/strided_walk.h>

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

/// y[c] = scale * sum_r x[r * ld + c], c < cols: the column sums of a row-major (rows, cols)
/// block whose rows are ld apart, accumulated (and scaled) in Accum<T>. A column's sum depends on
/// that column alone, so a caller may split the columns among threads and get the same bits: in
/// row order, or by accumulate() for a single contiguous column (cols = ld = 1).
template <class T>
void sum_rows_ld(const T* x, int64_t rows, int64_t cols, int64_t ld, T* y, Accum<T> scale = 1) {
  if (cols == 1 && ld == 1) {
    y[0] = static_cast<T>(scale * accumulate(x, rows));
    return;
  }
  if constexpr (std::is_same_v<T, Accum<T>>) {
    auto acc = MapArr<T>(y, cols);
    acc.setZero();
    for (int64_t r = 0; r < rows; ++r) acc += CMapArr<T>(x + r * ld, cols);
    if (scale != 1) acc *= scale;
  } else {
    // kColumns columns at a time, their sums on the stack; rows kRowTile at a time, each group of
    // kLanes columns of a row tile added with its sums in registers (four of AVX-512's, eight of
    // AVX2's): the sums cost a load and a store a tile, not an entry, the rows are read along,
    // a tile's few rows stay on the same pages, and each column is still summed in row order.
    constexpr int64_t kColumns = 1024, kRowTile = 16, kLanes = 32;
    Accum<T> acc[kColumns];
    for (int64_t c = 0; c < cols; c += kColumns) {
      const int64_t m = std::min(kColumns, cols - c), whole = m / kLanes * kLanes;
      std::fill(acc, acc + m, Accum<T>(0));
      for (int64_t r0 = 0; r0 < rows; r0 += kRowTile) {
        const int64_t r1 = std::min(rows, r0 + kRowTile);
        for (int64_t j0 = 0; j0 < whole; j0 += kLanes) {
          Accum<T> lanes[kLanes];
#pragma GCC unroll 32
          for (int64_t j = 0; j < kLanes; ++j) lanes[j] = acc[j0 + j];
          for (int64_t r = r0; r < r1; ++r) {
            const T* row = x + r * ld + c + j0;
#pragma GCC unroll 32
            for (int64_t j = 0; j < kLanes; ++j) lanes[j] += row[j];
          }
#pragma GCC unroll 32
          for (int64_t j = 0; j < kLanes; ++j) acc[j0 + j] = lanes[j];
        }
        for (int64_t r = r0; r < r1; ++r) {  // the columns past the last group
          const T* row = x + r * ld + c;
          for (int64_t j = whole; j < m; ++j) acc[j] += row[j];
        }
      }
      for (int64_t j = 0; j < m; ++j) y[c + j] = static_cast<T>(scale * acc[j]);
    }
  }
}

/// y[c] = scale * sum_r x[r * cols + c]: the column sums of a row-major (rows, cols) block,
/// accumulated (and scaled) in Accum<T>.
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t cols, T* y, Accum<T> scale = 1) {
  sum_rows_ld(x, rows, cols, cols, y, scale);
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

/// y[o, i] = f(row, stride) for every row along the reduction's axis: row points at its first
/// entry, the k-th is row[k * stride] (for the reductions that are not sums: var).
template <class T, class F>
void reduce_rows(const T* x, const AxisReduction& r, T* y, F f) {
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) y[o * r.inner + i] = f(x + o * r.n * r.inner + i, r.inner);
}

/// y = scale * the sums of x over the reduction's axis.
template <class T>
void sum_axis(const T* x, const AxisReduction& r, T* y, Accum<T> scale = 1) {
  for (int64_t o = 0; o < r.outer; ++o)
    sum_rows(x + o * r.n * r.inner, r.n, r.inner, y + o * r.inner, scale);
}

/// A reduction over several axes: the output's shape, the shape with the reduced axes kept as 1
/// (what the derivative broadcasts back from), and n, the count of elements per output entry.
struct AxesReduction {
  Shape in, out, kept;
  std::array<bool, kMaxRank> reduced{};
  int64_t n = 1;
};

/// dims as PyTorch's sum(x, dims): negative counts from the end, an empty list means every
/// axis. Throws ShapeError naming `op`, the dims and the shape for a dim out of range or one
/// given twice.
inline AxesReduction axes_reduction(const Shape& s, const std::vector<int>& dims, bool keepdim,
                                    const char* op) {
  auto dims_str = [&] {
    std::string t = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) t += (i ? ", " : "") + std::to_string(dims[i]);
    return t + (dims.size() == 1 ? ",)" : ")");
  };
  AxesReduction r;
  r.in = s;
  const int rank = s.rank();
  for (int d : dims) {
    if (d < -rank || d >= rank)
      throw ShapeError(std::string(op) + ": dim " + std::to_string(d) + " of dims " + dims_str() +
                       " is out of range for shape " + s.str());
    const int ax = d < 0 ? d + rank : d;
    if (r.reduced[ax])
      throw ShapeError(std::string(op) + ": dim " + std::to_string(d) + " appears more than once in dims " +
                       dims_str() + " for shape " + s.str());
    r.reduced[ax] = true;
  }
  if (dims.empty()) r.reduced.fill(true);
  std::vector<int64_t> kept = s.vec(), dropped;
  for (int i = 0; i < rank; ++i) {
    if (r.reduced[i]) {
      r.n *= s[i];
      kept[i] = 1;
    } else {
      dropped.push_back(s[i]);
    }
  }
  r.kept = Shape(kept);
  r.out = keepdim ? r.kept : Shape(dropped);
  return r;
}

/// y = scale * the sums of x over the reduction's axes, accumulated in Accum<T>: x is walked in
/// order (a strided walk, ops/strided_walk.h), each row added to its outputs, or summed into
/// one when the row runs along a reduced axis.
template <class T>
void sum_axes(const T* x, const AxesReduction& r, T* y, Accum<T> scale = 1) {
  const int rank = r.in.rank();
  std::array<std::array<int64_t, kMaxRank>, 1> ost{};  // the output's stride per axis of x
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    ost[0][i] = r.reduced[i] ? 0 : stride;
    if (!r.reduced[i]) stride *= r.in[i];
  }
  const auto w = strided_walk<1>(r.in, ost);
  const int64_t m = w.row_length();
  const bool along_reduced = w.row_stride(0) == 0;
  std::vector<Accum<T>> acc(static_cast<std::size_t>(r.out.numel()), Accum<T>(0));
  const T* px = x;
  for_each_row(w, [&](const std::array<int64_t, 1>& at) {
    Accum<T>* a = acc.data() + at[0];
    if (along_reduced) {
      Accum<T> s = 0;
      for (int64_t j = 0; j < m; ++j) s += px[j];
      *a += s;
    } else {
      for (int64_t j = 0; j < m; ++j) a[j] += px[j];
    }
    px += m;
  });
  for (std::size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<T>(scale * acc[i]);
}

}  // namespace tg::detail
