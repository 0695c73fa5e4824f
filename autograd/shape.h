#pragma once
// Shape: rank 0 to 6, row-major. Small and held by value.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tg {

inline constexpr int kMaxRank = 6;

class Shape {
 public:
  Shape() = default;  // rank 0: a scalar
  /// Throws ShapeError for rank > 6, a negative dimension, or an element count past int64.
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  /// The first `rank` entries of `dims`.
  Shape(const int64_t* dims, int rank) : rank_(rank) {
    if (rank > kMaxRank || rank < 0) throw_bad(dims, rank);
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) {
      if (dims[i] < 0 || __builtin_mul_overflow(n, dims[i], &n)) throw_bad(dims, rank);
      dims_[i] = dims[i];
    }
  }

  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[axis]; }
  int64_t& operator[](int axis) { return dims_[axis]; }
  /// The element count (the constructors refuse shapes whose count overflows int64).
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  std::vector<int64_t> vec() const { return {dims_.begin(), dims_.begin() + rank_}; }
  /// "(3, 2)"; a scalar is "()".
  std::string str() const;
  /// The multi-index of a flat (row-major) element index, written as str() writes shapes:
  /// element 5 of (3, 2) is "(2, 1)". For messages that point at one element.
  std::string index_str(int64_t flat) const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }

 private:
  [[noreturn]] static void throw_bad(const int64_t* dims, int rank);
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// numpy broadcasting of two shapes; throws ShapeError naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

[[noreturn]] void throw_axis_error(int axis, const Shape& s, const char* op);

/// Turns a possibly negative axis into 0..rank-1; throws ShapeError naming `op` when out of range.
inline int normalize_axis(int axis, const Shape& s, const char* op) {
  const int r = s.rank();
  if (axis < -r || axis >= r) throw_axis_error(axis, s, op);
  return axis < 0 ? axis + r : axis;
}

/// Row-major strides in elements, 0 where the dimension broadcasts into `out` (rank of out).
std::array<int64_t, kMaxRank> broadcast_strides(const Shape& s, const Shape& out);

}  // namespace tg
