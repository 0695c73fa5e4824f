#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/loss_reduction.h>

namespace tg {
/// |x - y| elementwise, reduced (mean by default), as torch.nn.functional.l1_loss(x, y,
/// reduction=...); both x and y get gradients, 0 where x = y (as PyTorch's). Throws ShapeError
/// (shapes differ: no broadcasting) or ValueError (an int64 tensor, dtypes differ).
Tensor l1_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::mean,
               const std::source_location& where = std::source_location::current());
}  // namespace tg
