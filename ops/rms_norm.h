#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// RMS normalisation over the last axis (Llama's RMSNorm), in the input's dtype, as PyTorch's
/// `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight`. weight is (C,) or
/// undefined (then 1). A fused kernel; the formula is in ops. Throws ShapeError (weight not
/// (C,), rank 0) or ValueError (an int64 tensor, dtypes differ, eps < 0).
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps,
                const std::source_location& where = std::source_location::current());
}  // namespace tg
