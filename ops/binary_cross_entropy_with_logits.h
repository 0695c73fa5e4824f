#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/loss_reduction.h>

namespace tg {

/// torch.nn.functional.binary_cross_entropy_with_logits's keyword arguments:
/// `binary_cross_entropy_with_logits(x, y, {.pos_weight = pw, .reduction = Reduction::sum})`.
struct BceWithLogitsOptions {
  Tensor pos_weight{};  // weight of the positive term, broadcast to x (often (C,)); a constant
  Reduction reduction = Reduction::mean;
};

/// Binary cross-entropy of logits x against targets y in [0, 1] (of x's shape), in the stable
/// form: E = (1 - y) x + (1 + (p - 1) y) softplus(-x), p = pos_weight (1 without one), reduced
/// (mean by default). x and y get gradients; pos_weight is a constant. Throws ShapeError (y not
/// of x's shape, pos_weight not broadcasting to it) or ValueError (an int64 tensor, dtypes
/// differ, a pos_weight that requires grad).
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y,
                                        const BceWithLogitsOptions& options = {},
                                        const std::source_location& where = std::source_location::current());

/// The same with only the reduction given.
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, Reduction reduction,
                                        const std::source_location& where = std::source_location::current());

}  // namespace tg
