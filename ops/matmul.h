#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// op(a) @ op(b), where op transposes the last two axes when its flag is set (read in place, no
/// copy). Both operands have rank >= 2; leading (batch) axes broadcast like numpy, so
/// (B, T, D) @ (D, E) is (B, T, E). Throws ShapeError (rank below 2, inner dimensions differ,
/// batch axes do not broadcast) or ValueError (dtypes differ).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
              bool transpose_b = false, const std::source_location& where = std::source_location::current());
}  // namespace tg
