#pragma once
// The general broadcasting loop of the mask ops (compare, where, masked_fill; not installed):
// every element of an output shape in row-major order with its offsets into N inputs that
// broadcast to it, for any rank.

#include <array>
#include <cstddef>
#include <cstdint>

#include <tapegrad/autograd/shape.h>

namespace tg::detail {

/// Calls f(k, offsets) for each flat index k of `out`, offsets[j] the matching element of
/// inputs[j] (whose shapes broadcast to `out`, numpy style).
template <std::size_t N, class F>
void broadcast_walk(const Shape& out, const std::array<Shape, N>& inputs, F&& f) {
  std::array<std::array<int64_t, kMaxRank>, N> stride;
  for (std::size_t j = 0; j < N; ++j) stride[j] = broadcast_strides(inputs[j], out);
  const int rank = out.rank();
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, N> offset{};
  const int64_t n = out.numel();
  for (int64_t k = 0; k < n; ++k) {
    f(k, offset);
    for (int axis = rank - 1; axis >= 0; --axis) {  // the next multi-index, last axis fastest
      if (++index[axis] < out[axis]) {
        for (std::size_t j = 0; j < N; ++j) offset[j] += stride[j][axis];
        break;
      }
      for (std::size_t j = 0; j < N; ++j) offset[j] -= stride[j][axis] * (out[axis] - 1);
      index[axis] = 0;
    }
  }
}

}  // namespace tg::detail
