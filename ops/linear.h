#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// torch.nn.functional.linear: X W^T + b for X (..., in), W (out, in) and b (out) or undefined
/// (no bias); gives (..., out). One product, the bias written into the output before it
/// (matmul then add would take a second pass and a second buffer). Throws ShapeError (W not of
/// rank 2, X of rank 0 or with a last axis other than in, b not (out)) or ValueError (an
/// undefined X or W, an int64 or bool tensor, dtypes that differ).
Tensor linear(const Tensor& X, const Tensor& W, const Tensor& b = Tensor(),
              const std::source_location& where = std::source_location::current());
}  // namespace tg
