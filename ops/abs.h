#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// |x| elementwise, as torch.abs; its gradient at 0 is 0, as PyTorch's. Throws ValueError for
/// an int64 tensor.
Tensor abs(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
