#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Rotary position embedding over x of shape (..., T, d_h): position m = 0..T-1 (the index along
/// axis -2) rotates each interleaved pair (2i, 2i+1) by m * theta_i, theta_i = base^(-2i/d_h).
/// inverse rotates by the opposite angle (the transpose; it is rope's backward). Throws
/// ShapeError below rank 2 or for an odd d_h, ValueError for a base that is not finite and > 0.
Tensor rope(const Tensor& x, double base = 10000.0, bool inverse = false, const std::source_location& where = std::source_location::current());
}  // namespace tg
