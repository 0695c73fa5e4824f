// im2col: cols[n, (c kH + i) kW + j, oh W_out + ow] = X[n, c, oh sH - pH + i dH, ow sW - pW + j dW]
//   (0 where that index falls in the padding). A linear map, so its derivative is its adjoint:
//   dX = col2im(dcols), which adds each column entry back onto the pixel it was read from;
//   and col2im's derivative is im2col again (the adjoint of the adjoint). Being linear, each
//   one's tangent is itself applied to the tangent: tcols = im2col(tX), tX = col2im(tcols).

#include <tapegrad/ops/im2col.h>

#include <algorithm>
#include <cstring>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg::detail {

namespace {

// The output positions o in [0, n_out) whose input index o s - p + t lands inside [0, n_in):
// [lo, hi). Outside that range the tap reads padding.
struct Span {
  int64_t lo, hi;
};
Span valid_outputs(int64_t n_in, int64_t n_out, int64_t stride, int64_t offset) {
  // o s + offset >= 0  and  o s + offset < n_in, offset = t d - p.
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = n_in - offset <= 0 ? 0 : (n_in - offset + stride - 1) / stride;
  lo = std::min(lo, n_out);
  hi = std::clamp(hi, lo, n_out);
  return {lo, hi};
}

}  // namespace

template <class T>
void im2col_plane(const T* x, int64_t C, const ConvGeometry& g, T* cols) {
  const int64_t Ho = g.H_out(), Wo = g.W_out(), L = Ho * Wo;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        T* row = cols + ((c * g.kernel_h + i) * g.kernel_w + j) * L;  // (H_out, W_out)
        const int64_t oh_off = i * g.dilation_h - g.pad_h, ow_off = j * g.dilation_w - g.pad_w;
        const Span sh = valid_outputs(g.H, Ho, g.stride_h, oh_off);
        const Span sw = valid_outputs(g.W, Wo, g.stride_w, ow_off);
        std::fill(row, row + sh.lo * Wo, T(0));
        for (int64_t oh = sh.lo; oh < sh.hi; ++oh) {
          T* out = row + oh * Wo;
          const T* in = x + (c * g.H + oh * g.stride_h + oh_off) * g.W;
          std::fill(out, out + sw.lo, T(0));
          if (g.stride_w == 1)
            std::memcpy(out + sw.lo, in + sw.lo + ow_off, (sw.hi - sw.lo) * sizeof(T));
          else
            for (int64_t ow = sw.lo; ow < sw.hi; ++ow) out[ow] = in[ow * g.stride_w + ow_off];
          std::fill(out + sw.hi, out + Wo, T(0));
        }
        std::fill(row + sh.hi * Wo, row + L, T(0));
      }
}

template <class T>
void col2im_plane(const T* cols, int64_t C, const ConvGeometry& g, T* x) {
  const int64_t Ho = g.H_out(), Wo = g.W_out(), L = Ho * Wo;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const T* row = cols + ((c * g.kernel_h + i) * g.kernel_w + j) * L;
        const int64_t oh_off = i * g.dilation_h - g.pad_h, ow_off = j * g.dilation_w - g.pad_w;
        const Span sh = valid_outputs(g.H, Ho, g.stride_h, oh_off);
        const Span sw = valid_outputs(g.W, Wo, g.stride_w, ow_off);
        for (int64_t oh = sh.lo; oh < sh.hi; ++oh) {
          const T* in = row + oh * Wo;
          T* out = x + (c * g.H + oh * g.stride_h + oh_off) * g.W;
          for (int64_t ow = sw.lo; ow < sw.hi; ++ow) out[ow * g.stride_w + ow_off] += in[ow];
        }
      }
}

template void im2col_plane<float>(const float*, int64_t, const ConvGeometry&, float*);
template void im2col_plane<double>(const double*, int64_t, const ConvGeometry&, double*);
template void col2im_plane<float>(const float*, int64_t, const ConvGeometry&, float*);
template void col2im_plane<double>(const double*, int64_t, const ConvGeometry&, double*);

Tensor im2col(const Tensor& X, const ConvGeometry& g, const std::source_location& where) {
  const int64_t N = X.size(0), C = X.size(1), K = C * g.taps(), L = g.positions();
  Tensor cols({N, K, L}, X.dtype());  // (N, C kH kW, H_out W_out)
  dispatch(X.dtype(), [&]<class T>() {
    for (int64_t n = 0; n < N; ++n)
      im2col_plane(X.data<T>() + n * C * g.H * g.W, C, g, cols.data<T>() + n * K * L);
  });
  return record("im2col", std::move(cols), {X}, where)
      .formula([g, where](const Tensor& dcols) -> Grads { return {col2im(dcols, g, where)}; })
      .jvp([&](const Tangents& t) { return im2col(t[0], g, where); });
}

Tensor col2im(const Tensor& cols, const ConvGeometry& g, const std::source_location& where) {
  const int64_t N = cols.size(0), K = cols.size(1), C = K / g.taps(), L = g.positions();
  Tensor X = zeros({N, C, g.H, g.W}, cols.dtype());  // (N, C, H, W)
  dispatch(cols.dtype(), [&]<class T>() {
    for (int64_t n = 0; n < N; ++n)
      col2im_plane(cols.data<T>() + n * K * L, C, g, X.data<T>() + n * C * g.H * g.W);
  });
  return record("col2im", std::move(X), {cols}, where)
      .formula([g, where](const Tensor& dX) -> Grads { return {im2col(dX, g, where)}; })
      .jvp([&](const Tangents& t) { return col2im(t[0], g, where); });
}

}  // namespace tg::detail
