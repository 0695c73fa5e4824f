#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// 1 / (1 + exp(-x)) elementwise, as torch.sigmoid. Throws ValueError for an int64 tensor.
Tensor sigmoid(const Tensor& x, const std::source_location& where = std::source_location::current());
}  // namespace tg
