#pragma once
// Shared by the normalisation ops (internal to ops/): the check of a per-channel tensor, and the
// centre-and-scale step and its gradient over a set of axes, in tg ops, so create_graph
// differentiates them again.
//   mu = mean(X), r = 1 / sqrt(mean((X - mu)^2) + eps), Xhat = (X - mu) r;
//   for g = dL/dXhat:  dX = r (g - mean(g) - Xhat mean(g Xhat))   (means over `dims`, kept)

#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg::detail {

/// `p` undefined, or (C,) of X's dtype with C = X's axis 1; else ValueError (dtype) or ShapeError
/// naming `op`, `name` and the shapes.
void check_per_channel(const char* op, const Tensor& X, const Tensor& p, const char* name);

struct Normalized {
  Tensor Xhat;  // of X's shape
  Tensor r;     // 1 / sqrt(var + eps), size 1 along `dims`
};

/// Xhat and r of X over `dims` (biased variance).
Normalized normalize_over(const Tensor& X, const std::vector<int>& dims, double eps);

/// The gradient with respect to X of a function of Xhat, from g = dL/dXhat.
Tensor normalize_over_backward(const Normalized& n, const Tensor& g, const std::vector<int>& dims);

}  // namespace tg::detail
