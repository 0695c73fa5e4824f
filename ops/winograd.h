#pragma once
// conv2d's 3 x 3 kernels at stride 1 and dilation 1 by Winograd's minimal filtering F(2 x 2, 3 x 3)
// (internal to ops/, used by conv.cpp's kernels; the formula stays im2col's). Each 2 x 2 block of
// the output (a tile) comes from a 4 x 4 patch d of the padded input and a 3 x 3 kernel g as
//   Y_tile = A^T [ (G g G^T) ⊙ (B^T d B) ] A
// so an image's convolution becomes 16 matrix products of (C_out, C_in) by (C_in, tiles), one per
// entry of the 4 x 4 transformed domain: 2.25x fewer multiplications than im2col's product. The
// backward is the adjoint of the same linear maps (dW = G^T (sum over tiles) G, dX = B (...) B^T
// scattered back onto the overlapping patches), so its gradients are the forward's exact
// derivative up to rounding. Images are taken in chunks of about a thousand tiles; the chunks
// do not depend on the thread count, and dW sums the chunks in order, so neither do the results.

#include <cstdint>

#include <tapegrad/ops/im2col.h>

namespace tg::detail {

/// A 3 x 3 kernel at stride 1 and dilation 1 (any padding, any plane size) over at least 8
/// input channels per group (fewer: im2col's product is faster).
bool winograd_fits(const ConvGeometry& g, int64_t channels_per_group);

/// y (N, C_out, H_out, W_out) = conv2d(x (N, C, H, W), w (C_out, C / G, 3, 3)) + b (b may be
/// null), on a geometry with winograd_fits().
template <class T>
void winograd_forward(const ConvSizes& s, const T* x, const T* w, const T* b, T* y);

/// The gradients of winograd_forward for dy (N, C_out, H_out, W_out): dx (N, C, H, W) and
/// dw (C_out, C / G, 3, 3), each overwritten; either may be null (not wanted).
template <class T>
void winograd_backward(const ConvSizes& s, const T* x, const T* w, const T* dy, T* dx, T* dw);

}  // namespace tg::detail
