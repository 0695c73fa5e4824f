#pragma once
// Strided walks: the loop behind the kernels that read or write through strides (broadcasting,
// sum_to and sum over axes, permute; not installed).
//
// A shape of rank 0 to 6 is walked row by row in row-major order, each operand at its own
// strides (0 along an axis it broadcasts over). Before the walk, axes of size 1 are dropped and
// neighbouring axes that every operand steps through contiguously are merged: (1, 1, B, T, D)
// with one stride layout walks as (B T, D) or (B T D), so a rank-6 tensor costs what the same
// elements cost at rank 2, and the rows handed to the kernel are as long as they can be.

#include <array>
#include <cstdint>

#include <tapegrad/autograd/shape.h>

namespace tg::detail {

/// The merged loops of a walk over N operands: dims[0, rank) and each operand's strides.
template <int N>
struct StridedWalk {
  int rank = 0;
  bool empty = false;  // some axis has size 0: there is nothing to walk
  std::array<int64_t, kMaxRank> dims{};
  std::array<std::array<int64_t, kMaxRank>, N> stride{};
  /// Operand k's step along a row (the last merged axis); 0 for a walk of rank 0.
  int64_t row_stride(int k) const { return rank ? stride[k][rank - 1] : 0; }
  /// The length of every row: the last merged axis, 1 for a walk of rank 0 (one element).
  int64_t row_length() const { return rank ? dims[rank - 1] : 1; }
};

/// The walk over `shape` with operand k at strides `st[k]` (indexed by shape's axes).
template <int N>
StridedWalk<N> strided_walk(const Shape& shape,
                            const std::array<std::array<int64_t, kMaxRank>, N>& st) {
  StridedWalk<N> w;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 0) w.empty = true;
    if (shape[i] == 1) continue;
    bool merge = w.rank > 0;
    for (int k = 0; k < N && merge; ++k) merge = st[k][i] * shape[i] == w.stride[k][w.rank - 1];
    if (merge) {  // axis i continues the previous one for every operand
      w.dims[w.rank - 1] *= shape[i];
      for (int k = 0; k < N; ++k) w.stride[k][w.rank - 1] = st[k][i];
      continue;
    }
    w.dims[w.rank] = shape[i];
    for (int k = 0; k < N; ++k) w.stride[k][w.rank] = st[k][i];
    ++w.rank;
  }
  return w;
}

/// Calls row(offsets) once per row of the walk, in row-major order: offsets[k] is operand k's
/// offset of the row's first element; along the row, operand k steps by w.row_stride(k) for
/// w.row_length() elements. The outer axes are five nested loops, padded in front with loops of
/// one trip: nested loops keep the offsets in registers, where an odometer over an index array
/// made rows of 64 floats 40% slower to copy.
template <int N, class Row>
void for_each_row(const StridedWalk<N>& w, Row&& row) {
  static_assert(kMaxRank == 6, "for_each_row nests kMaxRank - 1 loops");
  if (w.empty) return;
  constexpr int kOuter = kMaxRank - 1;
  std::array<int64_t, kOuter> d;  // the outer axes, the last kOuter of them w's
  std::array<std::array<int64_t, kOuter>, N> s{};
  d.fill(1);
  const int lead = kOuter - (w.rank > 0 ? w.rank - 1 : 0);
  for (int a = 0; a + 1 < w.rank; ++a) {
    d[lead + a] = w.dims[a];
    for (int k = 0; k < N; ++k) s[k][lead + a] = w.stride[k][a];
  }
  std::array<int64_t, N> o0{}, o1, o2, o3, o4;
  for (int64_t i0 = 0; i0 < d[0]; ++i0) {
    for (int k = 0; k < N; ++k) o0[k] = i0 * s[k][0];
    for (int64_t i1 = 0; i1 < d[1]; ++i1) {
      for (int k = 0; k < N; ++k) o1[k] = o0[k] + i1 * s[k][1];
      for (int64_t i2 = 0; i2 < d[2]; ++i2) {
        for (int k = 0; k < N; ++k) o2[k] = o1[k] + i2 * s[k][2];
        for (int64_t i3 = 0; i3 < d[3]; ++i3) {
          for (int k = 0; k < N; ++k) o3[k] = o2[k] + i3 * s[k][3];
          for (int64_t i4 = 0; i4 < d[4]; ++i4) {
            for (int k = 0; k < N; ++k) o4[k] = o3[k] + i4 * s[k][4];
            row(o4);
          }
        }
      }
    }
  }
}

}  // namespace tg::detail
