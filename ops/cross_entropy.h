#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Mean cross-entropy of logits (N, V) against int64 targets (N,), as
/// torch.nn.functional.cross_entropy: -mean over the targets that are not ignore_index of
/// log_softmax(logits)[n, target[n]]. Every target ignored gives NaN (as PyTorch). Throws
/// ShapeError (ranks, N differs), ValueError (targets not int64, a target outside [0, V) that is
/// not ignore_index).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -1,
                     const std::source_location& where = std::source_location::current());
}  // namespace tg
