#pragma once
// Shared by softmax, log_softmax and logsumexp along an axis that is not the last (not
// installed). Such an axis splits the tensor into `outer` slabs of n rows (the axis) by `inner`
// columns, and each slice is a column, its entries `inner` apart. Worked a slice at a time, every
// entry read took its own cache line, and libm or a scalar loop did the rest: 2.5 to 16 times
// PyTorch's time at (8, 256, 256) along axis -2. Here each slab is worked a block of columns at a
// time, row by row: every step reads a contiguous run of a row, vectorised. Blocks start at fixed
// columns whatever the team, so one thread and two give the same bits.

#include <algorithm>
#include <cstdint>

#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

/// Fewer columns than this (a slab narrower than one vector of floats), and the blocks' steps per
/// row cost more than they save (a slab of 2 columns took 16 times as long as by slices): such an
/// axis goes by for_slices instead.
inline constexpr int64_t kMinColumns = 16;

/// f(start, scratch) for every slice of a reduction, slices on the team: the slice's r.n entries
/// are r.inner apart from `start`; `scratch` is the calling part's own `rows` rows of r.n entries
/// (contiguous; gather and scatter copy a slice in and out), so the slice can be worked as a row
/// of the last axis.
template <class T, class F>
void for_slices(const AxisReduction& r, int64_t rows, const F& f) {
  for_parts(
      r.outer * r.inner,
      [&](int64_t begin, int64_t end) {
        Eigen::Array<T, Eigen::Dynamic, 1> scratch(rows * r.n);
        for (int64_t s = begin; s < end; ++s)
          f((s / r.inner) * r.n * r.inner + s % r.inner, scratch.data());
      },
      pass_serial_below(r.n));
}

/// row = the n entries `stride` apart from x.
template <class T>
void gather(const T* x, int64_t n, int64_t stride, T* row) {
  for (int64_t k = 0; k < n; ++k) row[k] = x[k * stride];
}

/// The n entries `stride` apart from y = row.
template <class T>
void scatter(const T* row, int64_t n, int64_t stride, T* y) {
  for (int64_t k = 0; k < n; ++k) y[k * stride] = row[k];
}

/// The most columns in a block (callers keep a block's column maxima and sums on the stack).
inline constexpr int64_t kMaxColumnBlock = 1024;

/// Columns per block: the block's n rows about 64 KiB of T (so its passes stay in L2), a
/// multiple of 16 from 16 to kMaxColumnBlock.
template <class T>
int64_t column_block(int64_t n) {
  const int64_t row_bytes = static_cast<int64_t>(sizeof(T)) * std::max<int64_t>(n, 1);
  const int64_t fit = (int64_t{1} << 16) / row_bytes;
  return std::clamp<int64_t>(fit - fit % 16, 16, kMaxColumnBlock);
}

/// f(o, c, w) for every block of a reduction's slabs: columns [c, c + w) of slab o (w at most
/// column_block<T>(r.n)); the block's first entry is at o * r.n * r.inner + c, its rows r.inner
/// apart. Blocks go to the team.
template <class T, class F>
void for_column_blocks(const AxisReduction& r, const F& f) {
  const int64_t W = column_block<T>(r.n), per_slab = (r.inner + W - 1) / W;
  for_parts(
      r.outer * per_slab,
      [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          const int64_t o = b / per_slab, c = (b % per_slab) * W;
          f(o, c, std::min(W, r.inner - c));
        }
      },
      pass_serial_below(r.n * ((r.inner + per_slab - 1) / per_slab)));  // (blocks' mean width)
}

/// m = the maxima of w columns over n rows `stride` apart from x. (With a NaN in a column, m may
/// or may not be NaN there; either way the NaN reaches the column's exps and their sum.)
template <class T>
void column_max(const T* x, int64_t n, int64_t stride, int64_t w, T* m) {
  auto mx = MapArr<T>(m, w);
  mx = CMapArr<T>(x, w);
  for (int64_t k = 1; k < n; ++k) mx = mx.max(CMapArr<T>(x + k * stride, w));
}

/// e = exp(x - m) row by row, each row by exp_into, and s = the columns' sums of e in S, added
/// row after row. x's rows are `stride` apart, e's `e_stride` (e may be x; with e_stride 0 every
/// row's exps go to one scratch row).
template <class T, class S>
void column_exp_sums(const T* x, int64_t n, int64_t stride, int64_t w, const T* m, T* e,
                     int64_t e_stride, S* s) {
  const auto shift = CMapArr<T>(m, w);
  auto sum = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>(s, w);
  sum.setZero();
  for (int64_t k = 0; k < n; ++k) {
    auto row = MapArr<T>(e + k * e_stride, w);
    row = CMapArr<T>(x + k * stride, w) - shift;
    exp_into(row.data(), row.data(), w);
    sum += row.template cast<S>();
  }
}

}  // namespace tg::detail
