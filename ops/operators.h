#pragma once
// Arithmetic as a C++ user writes it: scalar operands (taking the tensor's dtype, so
// mul(x_f32, 2.0) stays float32), the operators + - * / and unary -, and the elementwise ops as
// function values (tg::fn::exp, ...) for code that passes ops around.
//
// The named calls (add, mul, ...) record the caller's line for error messages; an operator
// cannot take that extra argument, so a node made by an operator names this header instead.

#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/add.h>
#include <tapegrad/ops/div.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/gelu.h>
#include <tapegrad/ops/log.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/relu.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/softmax.h>
#include <tapegrad/ops/sqrt.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/tanh.h>

namespace tg {

/// x + c, x - c, c - x, x * c, x / c, c / x with the constant in x's dtype. Never throw for a
/// defined float tensor.
inline Tensor add(const Tensor& x, double c, const std::source_location& where = std::source_location::current()) {
  return add(x, scalar(c, x.dtype()), where);
}
inline Tensor sub(const Tensor& x, double c, const std::source_location& where = std::source_location::current()) {
  return sub(x, scalar(c, x.dtype()), where);
}
inline Tensor sub(double c, const Tensor& x, const std::source_location& where = std::source_location::current()) {
  return sub(scalar(c, x.dtype()), x, where);
}
inline Tensor mul(const Tensor& x, double c, const std::source_location& where = std::source_location::current()) {
  return scale(x, c, where);
}
inline Tensor div(const Tensor& x, double c, const std::source_location& where = std::source_location::current()) {
  return div(x, scalar(c, x.dtype()), where);
}
inline Tensor div(double c, const Tensor& x, const std::source_location& where = std::source_location::current()) {
  return div(scalar(c, x.dtype()), x, where);
}

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return scale(x, -1.0); }
inline Tensor operator+(const Tensor& x, double c) { return add(x, c); }
inline Tensor operator+(double c, const Tensor& x) { return add(x, c); }
inline Tensor operator-(const Tensor& x, double c) { return sub(x, c); }
inline Tensor operator-(double c, const Tensor& x) { return sub(c, x); }
inline Tensor operator*(const Tensor& x, double c) { return scale(x, c); }
inline Tensor operator*(double c, const Tensor& x) { return scale(x, c); }
inline Tensor operator/(const Tensor& x, double c) { return div(x, c); }
inline Tensor operator/(double c, const Tensor& x) { return div(c, x); }

/// The elementwise ops as function values: `std::function<Tensor(const Tensor&)> f = tg::fn::exp;`
/// A direct call (`tg::fn::exp(x)`) still records the caller's line.
namespace fn {
using Where = std::source_location;
inline constexpr auto exp = [](const Tensor& x, const Where& w = Where::current()) { return tg::exp(x, w); };
inline constexpr auto log = [](const Tensor& x, const Where& w = Where::current()) { return tg::log(x, w); };
inline constexpr auto tanh = [](const Tensor& x, const Where& w = Where::current()) { return tg::tanh(x, w); };
inline constexpr auto sqrt = [](const Tensor& x, const Where& w = Where::current()) { return tg::sqrt(x, w); };
inline constexpr auto rsqrt = [](const Tensor& x, const Where& w = Where::current()) { return tg::rsqrt(x, w); };
inline constexpr auto relu = [](const Tensor& x, const Where& w = Where::current()) { return tg::relu(x, w); };
inline constexpr auto softmax = [](const Tensor& x, int dim = -1, const Where& w = Where::current()) {
  return tg::softmax(x, dim, w);
};
inline constexpr auto gelu = [](const Tensor& x, GeluApproximate a = GeluApproximate::none,
                                const Where& w = Where::current()) { return tg::gelu(x, a, w); };
}  // namespace fn

}  // namespace tg
