#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// A GRU layer's recurrence over a sequence, torch.nn.GRU's inner loop (gates r, z, n): gi
/// (T, B, 3H) holds the input projections x W_ih^T + b_ih of every step, w_hh (3H, H), b_hh
/// (3H) or undefined (none), h0 (B, H) the initial state. Returns the hidden states h_1 .. h_T,
/// (T, B, H). Throws ShapeError (ranks or sizes that do not fit together) or ValueError (an
/// undefined or non-float tensor, dtypes that differ).
Tensor gru_scan(const Tensor& gi, const Tensor& w_hh, const Tensor& b_hh, const Tensor& h0,
                const std::source_location& where = std::source_location::current());
}  // namespace tg
