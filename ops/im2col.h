#pragma once
// im2col and col2im (internal to ops/, not in ops.h): the unfolding that turns a convolution
// into one matrix product, and its adjoint. Both are linear and each is the other's derivative,
// so a formula written with them (conv2d's) is differentiable to any order.

#include <cstdint>
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg::detail {

/// A convolution's window over one (H, W) plane: kernel, stride, padding and dilation per axis,
/// and PyTorch's output size (H + 2 p - d (k - 1) - 1) / s + 1 (rounded down).
struct ConvGeometry {
  int64_t H, W;                    // the input plane
  int64_t kernel_h, kernel_w;      // kH, kW
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;            // zeros on both sides
  int64_t dilation_h, dilation_w;  // the gap between kernel taps, 1 for none
  int64_t H_out() const { return (H + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  int64_t W_out() const { return (W + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
  int64_t taps() const { return kernel_h * kernel_w; }
  int64_t positions() const { return H_out() * W_out(); }
};

/// One convolution: N images of C channels in G groups into C_out channels over geometry g.
struct ConvSizes {
  int64_t N, C, C_out, G;
  ConvGeometry g;
};

/// cols[(c kH + i) kW + j, oh W_out + ow] = x[c, oh sH - pH + i dH, ow sW - pW + j dW] (0 in the
/// padding), for one image x (C, H, W) into cols (C kH kW, H_out W_out).
template <class T>
void im2col_plane(const T* x, int64_t C, const ConvGeometry& g, T* cols);

/// The adjoint: x[c, ih, iw] += cols[...] over every entry that im2col_plane reads from it.
template <class T>
void col2im_plane(const T* cols, int64_t C, const ConvGeometry& g, T* x);

/// (N, C, H, W) -> (N, C kH kW, H_out W_out). Its derivative is col2im.
Tensor im2col(const Tensor& X, const ConvGeometry& g,
              const std::source_location& where = std::source_location::current());

/// (N, C kH kW, H_out W_out) -> (N, C, H, W), summing the entries that share an input pixel.
/// Its derivative is im2col.
Tensor col2im(const Tensor& cols, const ConvGeometry& g,
              const std::source_location& where = std::source_location::current());

}  // namespace tg::detail
