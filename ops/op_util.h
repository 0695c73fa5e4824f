#pragma once
// Shared by the op sources (not installed): Eigen views over tensor buffers and the checks every
// op starts with.

#include <Eigen/Core>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/tensor.h>

namespace tg::detail {

template <class T>
using MatRM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapMat = Eigen::Map<MatRM<T>>;
template <class T>
using CMapMat = Eigen::Map<const MatRM<T>>;
template <class T>
using MapArr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CMapArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// The sum of n entries by 16 lanes from p's first entry (the last n % 16 as a row of 16 padded
/// with zeros), then across the lanes: the same order wherever p starts. (Eigen's sum over a
/// dynamic map starts its packets at the first aligned entry, so equal rows at other offsets
/// summed to other bits.)
template <class T>
T row_sum(const T* p, int64_t n) {
  constexpr int64_t kLanes = 16;
  using Lanes = Eigen::Array<T, kLanes, 1>;
  Lanes acc = Lanes::Zero();
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) acc += Eigen::Map<const Lanes>(p + i);
  if (full < n) {
    Lanes rest = Lanes::Zero();
    std::copy(p + full, p + n, rest.data());
    acc += rest;
  }
  return acc.sum();
}

/// The dot product of n entries of a and b, in row_sum's order: the same bits wherever they start.
template <class T>
T row_dot(const T* a, const T* b, int64_t n) {
  constexpr int64_t kLanes = 16;
  using Lanes = Eigen::Array<T, kLanes, 1>;
  Lanes acc = Lanes::Zero();
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes)
    acc += Eigen::Map<const Lanes>(a + i) * Eigen::Map<const Lanes>(b + i);
  if (full < n) {
    Lanes ra = Lanes::Zero(), rb = Lanes::Zero();
    std::copy(a + full, a + n, ra.data());
    std::copy(b + full, b + n, rb.data());
    acc += ra * rb;
  }
  return acc.sum();
}

/// y[i] = exp(x[i]) for n entries (y may be x): Eigen's vectorised exp 16 entries at a time
/// from x's first, the last n % 16 through a row of 16 (a dynamic map would send the entries
/// before its first aligned one and after its last whole packet through libm, so an entry's bits
/// would depend on its address), and glibc's exp for the entries past Eigen's clamp, found by a
/// branch-free check per block: exp(-inf) is 0 (not what the clamp gives, so masked entries need
/// no select), exp(1000) inf, results below the normal range the right denormal or 0. Eigen's
/// exp is within a few units in the last place (glibc's within one). (Never write an exp inside
/// an Eigen select: Eigen 3.4 evaluates a select entry by entry, through glibc's exp, 20 times
/// slower.)
template <class T>
void exp_into(const T* x, T* y, int64_t n) {
  constexpr int64_t kBlock = 1024, kLanes = 16;
  using Lanes = Eigen::Array<T, kLanes, 1>;
  constexpr T kLo = std::is_same_v<T, float> ? T(-87) : T(-708), kHi = -kLo;
  T kept[kBlock];  // a block's arguments, when one is past the clamp and y is x
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b), full = m - m % kLanes;
    int outside = 0;  // (an int: a bool accumulator kept the loop scalar)
    for (int64_t i = 0; i < m; ++i) outside |= !((x[b + i] > kLo) & (x[b + i] < kHi));
    if (outside) std::copy_n(x + b, m, kept);
    for (int64_t i = b; i < b + full; i += kLanes)
      Eigen::Map<Lanes>(y + i) = Eigen::Map<const Lanes>(x + i).exp();
    if (full < m) {
      Lanes rest = Lanes::Zero();
      std::copy(x + b + full, x + b + m, rest.data());
      rest = rest.exp();
      std::copy_n(rest.data(), m - full, y + b + full);
    }
    if (!outside) continue;
    for (int64_t i = 0; i < m; ++i)
      if (!(kept[i] > kLo && kept[i] < kHi)) y[b + i] = std::exp(kept[i]);
  }
}

/// c ? a : b, branch-free (both are computed anyway): a loop of these vectorises on AVX2 too,
/// where GCC keeps a ?: on floats as a branch and the loop scalar.
template <class T>
inline T pick(bool c, T a, T b) {
  static_assert(std::is_floating_point_v<T>);
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U m = U(0) - U(c);
  return std::bit_cast<T>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m));
}

/// sum_i exp(x[i] - shift) over n entries, for a shift at least every x[i] (a row's max, so the
/// sum is at least 1): by 16 lanes from x's first entry, as exp_into takes them, without storing
/// the exps and without exp_into's fix-up past Eigen's clamp (an entry there, -inf included, adds
/// the clamp's value, under 1e-37 in float32 and 1e-307 in float64: nothing to a sum of 1 or more).
template <class T>
T exp_sum_below(const T* x, T shift, int64_t n) {
  constexpr int64_t kLanes = 16;
  using Lanes = Eigen::Array<T, kLanes, 1>;
  Lanes acc = Lanes::Zero();
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) acc += (Eigen::Map<const Lanes>(x + i) - shift).exp();
  if (full < n) {
    Lanes rest = Lanes::Constant(shift);
    std::copy(x + full, x + n, rest.data());
    rest = (rest - shift).exp();
    std::fill(rest.data() + (n - full), rest.data() + kLanes, T(0));  // the padding adds nothing
    acc += rest;
  }
  return acc.sum();
}

/// y = log1p(y) for n entries: Eigen's, vectorised, for float; Eigen vectorises log but not
/// log1p for double, so there Goldberg's form y (log(u) / (u - 1)), u = 1 + y (what Eigen's float
/// log1p computes; y log(u) first would overflow past y = 2.5e305), within a few units in the last
/// place; inf stays inf, NaN NaN.
template <class T>
void log1p_into(T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    MapArr<T>(y, n) = MapArr<T>(y, n).log1p();
  } else {
    constexpr int64_t kBlock = 1024;
    alignas(64) T u[kBlock], l[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      T* yb = y + b;
      MapArr<T>(u, m) = MapArr<T>(yb, m) + T(1);
      MapArr<T>(l, m) = MapArr<T>(u, m).log();
      for (int64_t i = 0; i < m; ++i) {
        const T r = pick(u[i] == T(1), yb[i], yb[i] * (l[i] / (u[i] - T(1))));  // (no overflow)
        yb[i] = pick(u[i] == std::numeric_limits<T>::infinity(), u[i], r);
      }
    }
  }
}

inline void check_defined(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + name + " is an undefined tensor");
}

/// A defined float32 or float64 tensor; int64 (indices) is a ValueError naming the op.
inline void check_floating(const char* op, const Tensor& t) {
  check_defined(op, t, "input");
  if (!is_floating(t.dtype()))
    throw ValueError(std::string(op) + ": needs a float32 or float64 tensor, got " +
                     dtype_name(t.dtype()) + " of shape " + t.shape().str());
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "first input");
  check_defined(op, b, "second input");
  if (a.dtype() != b.dtype())
    throw ValueError(std::string(op) + ": dtypes differ: " + a.shape().str() + " " +
                     dtype_name(a.dtype()) + " and " + b.shape().str() + " " +
                     dtype_name(b.dtype()));
}

inline void check_min_rank(const char* op, const Tensor& t, int rank) {
  check_defined(op, t, "input");
  if (t.rank() < rank)
    throw ShapeError(std::string(op) + ": needs rank " + std::to_string(rank) +
                     " or more, got shape " + t.shape().str());
}

}  // namespace tg::detail
