#pragma once
// Element types. A Tensor carries its dtype at run time, so one user function serves float and
// double alike (gradcheck runs a float computation in double by handing it double inputs).

#include <cstddef>
#include <string>

namespace tg {

enum class Dtype { f32, f64 };

inline const char* dtype_name(Dtype d) { return d == Dtype::f32 ? "float32" : "float64"; }
inline std::size_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : 8; }

template <class T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<float>() { return Dtype::f32; }
template <>
constexpr Dtype dtype_of<double>() { return Dtype::f64; }

/// Calls f.template operator()<T>() with T = float or double: `dispatch(d, [&]<class T>() {...})`.
template <class F>
decltype(auto) dispatch(Dtype d, F&& f) {
  if (d == Dtype::f32) return f.template operator()<float>();
  return f.template operator()<double>();
}

}  // namespace tg
