#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// The comparisons, as torch.eq, ne, lt, le, gt, ge: a bool tensor of a OP b elementwise with
/// numpy broadcasting (IEEE semantics: NaN is unequal to everything, ne is true for it). a and b
/// have one dtype (float32, float64, int64 or bool); a double b compares with a scalar of a's
/// dtype. Never differentiable (the result requires no grad). Throws ShapeError (no broadcast),
/// ValueError (dtypes differ, an undefined tensor).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
/// Elementwise not of a bool tensor (torch.logical_not). Throws ValueError for another dtype.
Tensor logical_not(const Tensor& mask);
}  // namespace tg
