#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/loss_reduction.h>

namespace tg {
/// (x - y)^2 elementwise, reduced (mean by default), as torch.nn.functional.mse_loss(x, y,
/// reduction=...); both x and y get gradients. Throws ShapeError (shapes differ: no
/// broadcasting) or ValueError (an int64 tensor, dtypes differ).
Tensor mse_loss(const Tensor& x, const Tensor& y, Reduction reduction = Reduction::mean,
                const std::source_location& where = std::source_location::current());
}  // namespace tg
