#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// a + b elementwise with numpy broadcasting. Throws ShapeError (no broadcast) or ValueError
/// (dtypes differ).
Tensor add(const Tensor& a, const Tensor& b, const std::source_location& where = std::source_location::current());
}  // namespace tg
