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

namespace tg::detail {

/// Whether a step's products run on the transposed state. With 16 to 32 rows (the batch B),
/// op(W)^T X^T, whose output has B as its narrow side, goes to BLIS's small-matrix path and runs
/// 25-30% faster than X op(W) (float, H 256, 4H gates, one thread, B 32: h W^T 241 -> 183 us,
/// dG W 281 -> 202 us; B 16: 113 -> 89, 132 -> 99 us). With 8 rows or fewer it is slower.
inline bool steps_by_columns(int64_t B) { return B >= 16 && B <= 32; }

/// dst (cols, rows), row stride ld, = src (rows, cols)^T, or dst += it. Blocks of SIMD width go
/// through Eigen's packet transpose, walked along the longer side (32 x 1024 float: 7 us, against
/// 18 us for a loop; 1024 x 32: 11 us against 22).
// (packet_traits<T>::type is an attributed vector type: GCC warns that a template argument drops
// the attribute, harmlessly, as Eigen's own headers do.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
void transpose_into(const T* src, int64_t rows, int64_t cols, T* dst, int64_t ld, bool add) {
  using namespace Eigen::internal;
  using P = typename packet_traits<T>::type;
  constexpr int n = unpacket_traits<P>::size;
  const auto one = [&](int64_t r, int64_t c) {
    dst[c * ld + r] = add ? dst[c * ld + r] + src[r * cols + c] : src[r * cols + c];
  };
  int64_t rb = 0, cb = 0;  // rows and columns covered by whole blocks
  if constexpr (n >= 4) {
    rb = rows / n * n, cb = cols / n * n;
    const auto block = [&](int64_t r0, int64_t c0) {
      PacketBlock<P, n> b;
      for (int i = 0; i < n; ++i) b.packet[i] = ploadu<P>(src + (r0 + i) * cols + c0);
      ptranspose(b);
      for (int j = 0; j < n; ++j) {
        T* out = dst + (c0 + j) * ld + r0;
        pstoreu(out, add ? padd(ploadu<P>(out), b.packet[j]) : b.packet[j]);
      }
    };
    if (rows > cols) {
      for (int64_t c0 = 0; c0 < cb; c0 += n)
        for (int64_t r0 = 0; r0 < rb; r0 += n) block(r0, c0);
    } else {
      for (int64_t r0 = 0; r0 < rb; r0 += n)
        for (int64_t c0 = 0; c0 < cb; c0 += n) block(r0, c0);
    }
  }
  for (int64_t r = 0; r < rb; ++r)  // the columns right of the blocks
    for (int64_t c = cb; c < cols; ++c) one(r, c);
  for (int64_t r = rb; r < rows; ++r)  // the rows below them
    for (int64_t c = 0; c < cols; ++c) one(r, c);
}
#pragma GCC diagnostic pop

/// t, or zeros of `shape` where it is undefined (a zero tangent), so the steps read it alike.
inline Tensor or_zeros(const Tensor& t, const Shape& shape, Dtype dtype) {
  return t.defined() ? t : zeros(shape, dtype);
}

/// Scratch for step_product over B rows with op(W) (k, n): none unless steps_by_columns(B).
inline Tensor step_scratch(int64_t B, int64_t k, int64_t n, Dtype dtype) {
  return steps_by_columns(B) ? Tensor(Shape{(k + n) * B}, dtype) : Tensor();
}

/// One step's product Y (B, n) = X (B, k) op(W), or Y += it (`accumulate`), op(W) (k, n): the
/// forward's h W^T, the backward's dG W. By columns (steps_by_columns(B)) through
/// Y^T = op(W)^T X^T, with X^T and Y^T in `scratch` (step_scratch).
template <class T>
void step_product(const T* X, MatrixView<const T> w, T* Y, int64_t B, bool accumulate,
                  Tensor& scratch) {
  const int64_t k = w.op_rows(), n = w.op_cols();
  if (!scratch.defined())
    return gemm<T>(view(X, B, k), w, view(Y, B, n), T(1), accumulate ? T(1) : T(0));
  T* xt = scratch.data<T>();  // (k, B)
  T* yt = xt + k * B;         // (n, B)
  transpose_into(X, B, k, xt, B, false);
  gemm<T>(w.t(), view<const T>(xt, k, B), view(yt, n, B));
  transpose_into<T>(yt, n, B, Y, n, accumulate);
}

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
