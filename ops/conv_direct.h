#pragma once
// conv2d's forward for a kernel of few taps a group (K = C_in / G kH kW at most 27: a first layer
// over 1 to 3 channels) at stride 1 and dilation 1 (internal to ops/, used by conv.cpp's forward
// kernel; the backward and the formula stay im2col's). There im2col's product has K as its inner
// size, too short for a GEMM to run well (BLIS: 7.5 to 15 us an image for pytorch/examples' conv1,
// (32, 9) by (9, 676)). This one computes blocks of output channels by up to 16 floats (8
// doubles) of one or two output rows in registers (sizes in ops/conv_direct.cpp), straight from
// the input's rows (zero-padded into scratch when the convolution pads): each output's K
// multiply-adds, from the bias, in im2col's order of taps.

#include <cstdint>

#include <tapegrad/ops/im2col.h>

namespace tg::detail {

/// Stride 1, dilation 1, more than one tap a channel (1 x 1 is im2col's product straight on the
/// input) and at most 27 per output (C_in / G kH kW), output rows of at least 16 entries.
bool direct_fits(const ConvGeometry& g, int64_t taps_per_output);

/// Entries of scratch direct_image needs: the padded planes of one image, or 0 without padding.
int64_t direct_scratch(const ConvSizes& s);

/// y (C_out, H_out, W_out) = conv2d(x (C, H, W), w (C_out, C / G, kH, kW)) + b (b may be null)
/// for one image, on a geometry with direct_fits(); scratch holds direct_scratch(s) entries.
template <class T>
void direct_image(const ConvSizes& s, const T* x, const T* w, const T* b, T* y, T* scratch);

}  // namespace tg::detail
