#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// sum(x^2) over all elements, as a rank-0 tensor.
Tensor sum_of_squares(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
