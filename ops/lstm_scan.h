#pragma once
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// An LSTM layer's recurrence over a sequence, torch.nn.LSTM's inner loop (gates i, f, g, o):
/// gi (T, B, 4H) holds the input projections x W_ih^T of every step, w_hh (4H, H), bias (4H)
/// the two biases' sum b_ih + b_hh (or undefined: none), h0 and c0 (B, H) the initial state.
/// Returns (2, T, B, H): the hidden states h_1 .. h_T, then the cell states c_1 .. c_T. Throws
/// ShapeError (ranks or sizes that do not fit together) or ValueError (an undefined or
/// non-float tensor, dtypes that differ).
Tensor lstm_scan(const Tensor& gi, const Tensor& w_hh, const Tensor& bias, const Tensor& h0,
                 const Tensor& c0, const std::source_location& where = std::source_location::current());
}  // namespace tg
