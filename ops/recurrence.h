#pragma once
// What the kernels of lstm_scan and gru_scan share (internal, not installed): one step's product
// with the recurrent weight, and the gradients of the recurrent weight and bias once every step's
// gate gradients dG are known.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <Eigen/Core>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/panel_kernel.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

/// t, or zeros of `shape` where it is undefined (a zero tangent), so the steps read it alike.
inline Tensor or_zeros(const Tensor& t, const Shape& shape, Dtype dtype) {
  return t.defined() ? t : zeros(shape, dtype);
}

/// One step's product over a sequence, Y (B, n) = X (B, k) op(W), or Y += it, with op(W) (k, n)
/// the same at every step: the forward's h W^T, the backward's dG W. op(W) is packed once, in
/// panels of kPanel columns (each (k, kPanel), row by row), and each step runs PanelKernel
/// (ops/panel_kernel.h) over them. The panel stays in the cache for all the rows, and the
/// per-call packing of the 1 MiB op(W) by BLIS or Eigen is gone (float, one thread, AVX-512, Zen
/// 5; a prototype timed alternately with Eigen's product while the other core was busy: 32 x 1024
/// x 256 106 against 57 GFLOP/s, 32 x 256 x 1024 107 against 57; the LSTM benchmark 49 -> 36-40
/// ms, docs/PERFORMANCE.md). The panels go to the team's threads (ops/threads.h). Widths that
/// are not a whole number of panels, and sequences of fewer than kMinSteps steps (the packing, a
/// pass over W, costs about one step), take gemm.
template <class T>
class StepProduct {
  using Kernel = PanelKernel<T>;
  static constexpr int64_t kPanel = Kernel::kPanel;
  static constexpr int64_t kMinSteps = 4;

 public:
  /// For `steps` products of B rows with op(w).
  StepProduct(MatrixView<const T> w, int64_t B, int64_t steps) : w_(w), B_(B) {
    const int64_t k = w.op_rows(), n = w.op_cols();
    if (!Kernel::kUseful || n % kPanel != 0 || steps < kMinSteps) return;  // gemm's
    packed_ = Tensor(Shape{k * n}, dtype_of<T>());
    T* out = packed_.data<T>();
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j)
        out[(j / kPanel) * k * kPanel + q * kPanel + j % kPanel] =
            w.transposed ? w.data[j * w.ld + q] : w.data[q * w.ld + j];
  }

  void operator()(const T* X, T* Y, bool accumulate) const {
    const int64_t k = w_.op_rows(), n = w_.op_cols();
    if (!packed_.defined())
      return gemm<T>(view(X, B_, k), w_, view(Y, B_, n), T(1), accumulate ? T(1) : T(0));
    const T* panels = packed_.data<T>();
    const auto run = [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p)
        Kernel::rows(X, k, B_, k, panels + p * k * kPanel, kPanel, Y + p * kPanel, n, accumulate);
    };
    // a team only for a step of 2^20 multiply-adds or more, in two panels or more
    const int64_t panel_work = std::max<int64_t>(1, B_ * k * kPanel);
    for_parts(n / kPanel, run, std::max<int64_t>(2, (int64_t{1} << 20) / panel_work));
  }

 private:
  MatrixView<const T> w_;
  int64_t B_;
  Tensor packed_;  // undefined: gemm's
};

/// dW = sum_t dG_t^T h_{t-1} (G, H), from dG (steps, B, G), the initial state h0 (B, H) and the
/// outputs hs (steps, B, H), whose first steps - 1 entries are h_1 .. h_{T-1}: two GEMMs, or one
/// when h0 is zeros (the layers' default state) and dG_1 finite, so that h0's term is zero (an
/// infinite or NaN dG_1 still makes NaN there, as the product would).
template <class T>
Tensor recurrent_weight_grad(const T* dG, const T* h0, const T* hs, int64_t steps, int64_t B,
                             int64_t G, int64_t H) {
  const bool h0_zero = steps > 0 &&
                       std::all_of(h0, h0 + B * H, [](T v) { return v == T(0); }) &&
                       std::all_of(dG, dG + B * G, [](T v) { return std::isfinite(v); });
  if (steps == 0 || (steps == 1 && h0_zero)) return zeros(Shape{G, H}, dtype_of<T>());
  Tensor dW(Shape{G, H}, dtype_of<T>());
  T* dw = dW.data<T>();
  if (!h0_zero) gemm<T>(view(dG, B, G).t(), view(h0, B, H), view(dw, G, H));
  if (steps > 1)
    gemm<T>(view(dG + B * G, (steps - 1) * B, G).t(), view(hs, (steps - 1) * B, H),
            view(dw, G, H), T(1), h0_zero ? T(0) : T(1));
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
