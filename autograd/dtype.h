#pragma once
// Element types. A Tensor carries its dtype at run time, so one user function serves float and
// double alike (gradcheck runs a float computation in double by handing it double inputs).
// int64 holds token indices: never differentiable, and only the ops that take indices accept it.
// bool holds masks: only the comparisons (eq, ne, lt, le, gt, ge) make it, only where and
// masked_fill take it; never differentiable.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tg {

enum class Dtype { f32, f64, i64, b8 };

inline const char* dtype_name(Dtype d) {
  return d == Dtype::f32 ? "float32" : d == Dtype::f64 ? "float64" : d == Dtype::i64 ? "int64" : "bool";
}
inline std::size_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : d == Dtype::b8 ? 1 : 8; }
inline bool is_floating(Dtype d) { return d == Dtype::f32 || d == Dtype::f64; }

template <class T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<float>() { return Dtype::f32; }
template <>
constexpr Dtype dtype_of<double>() { return Dtype::f64; }
template <>
constexpr Dtype dtype_of<int64_t>() { return Dtype::i64; }
template <>
constexpr Dtype dtype_of<bool>() { return Dtype::b8; }

[[noreturn]] void throw_not_floating(Dtype d);

/// The dtype of every factory (randn, zeros, full, arange with floating arguments, ...) and every
/// layer when none is given: float32 at start, as PyTorch's. Process-wide, as PyTorch's
/// (torch.set_default_dtype): set it once at start, before other threads make tensors; a
/// concurrent read is safe (atomic) but sees either value.
Dtype get_default_dtype();
/// Sets the default dtype (see get_default_dtype). Throws ValueError for int64: the default is
/// a floating dtype, as PyTorch's.
void set_default_dtype(Dtype dtype);

/// Calls f.template operator()<T>() with T = float or double: `dispatch(d, [&]<class T>() {...})`.
/// Throws ValueError for int64 and bool (the float ops' dispatch; index ops read int64
/// themselves).
template <class F>
decltype(auto) dispatch(Dtype d, F&& f) {
  if (d == Dtype::f32) return f.template operator()<float>();
  if (d != Dtype::f64) throw_not_floating(d);
  return f.template operator()<double>();
}

/// dispatch over every dtype: T = float, double, int64_t or bool (conversions, fills, copies).
template <class F>
decltype(auto) dispatch_any(Dtype d, F&& f) {
  if (d == Dtype::i64) return f.template operator()<int64_t>();
  if (d == Dtype::b8) return f.template operator()<bool>();
  return dispatch(d, f);
}

}  // namespace tg
