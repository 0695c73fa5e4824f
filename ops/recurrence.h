#pragma once
// What the backward kernels of lstm_scan and gru_scan share (internal, not installed): the
// gradients of the recurrent weight and bias once every step's gate gradients dG are known.

#include <cstdint>

#include <Eigen/Core>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/gemm.h>

namespace tg::detail {

/// dW = sum_t dG_t^T h_{t-1} (G, H), from dG (steps, B, G), the initial state h0 (B, H) and the
/// outputs hs (steps, B, H), whose first steps - 1 entries are h_1 .. h_{T-1}: two GEMMs.
template <class T>
Tensor recurrent_weight_grad(const T* dG, const T* h0, const T* hs, int64_t steps, int64_t B,
                             int64_t G, int64_t H) {
  Tensor dW = zeros(Shape{G, H}, dtype_of<T>());
  if (steps == 0) return dW;
  gemm<T>(view(dG, B, G).t(), view(h0, B, H), view(dW.data<T>(), G, H));
  gemm<T>(view(dG + B * G, (steps - 1) * B, G).t(), view(hs, (steps - 1) * B, H),
          view(dW.data<T>(), G, H), T(1), T(1));
  return dW;
}

/// A (n,) tensor of sums (the bias's gradient), or undefined when there is no bias.
template <class T>
Tensor bias_grad(const Tensor& bias, const Eigen::Array<T, Eigen::Dynamic, 1>& sums) {
  if (!bias.defined()) return Tensor();
  Tensor db(bias.shape(), bias.dtype());
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(db.data<T>(), sums.size()) = sums;
  return db;
}

}  // namespace tg::detail
