#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// How gelu computes Phi: exactly with erf ("none" in PyTorch), or the tanh approximation.
enum class GeluApproximate { none, tanh };
/// x Phi(x) elementwise, as torch.nn.functional.gelu(x, approximate=...). With the tanh form
/// the backward reads the output back (it keeps it, as a following Linear would): a write into
/// the output before the backward runs throws GraphError naming gelu.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none, const std::source_location& where = std::source_location::current());
}  // namespace tg
