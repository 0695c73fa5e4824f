#pragma once
#include <source_location>
#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// x + mask for a constant mask (0 where allowed, -inf where masked) broadcast over x's leading
/// axes, e.g. a (T, T) causal mask over (B, H, T, T) scores. A masked entry is -inf whatever x
/// holds there (even NaN), and its gradient is 0. Throws ShapeError when the mask does
/// not broadcast to x's shape, ValueError when it holds NaN or +inf, has another dtype, or
/// requires grad.
Tensor add_mask(const Tensor& x, const Tensor& mask, const std::source_location& where = std::source_location::current());

/// The (T, T) additive causal mask: 0 where j <= i, -inf above the diagonal. With window w > 0
/// also -inf where j <= i - w, so row i sees the w positions i-w+1..i. With query_offset o > 0
/// the last T rows of the (o + T, o + T) mask, (T, o + T): row i is position o + i (queries
/// after o cached keys). Throws ValueError for T < 0, w < 0 or o < 0.
Tensor causal_mask(int64_t T, Dtype dtype = Dtype::f64, int64_t window = 0,
                   int64_t query_offset = 0);

namespace detail {
/// The mask's options as every causal op takes them. Throws ValueError naming `op` for
/// window < 0 or query_offset < 0.
void check_causal_mask(const char* op, int64_t window, int64_t query_offset = 0);
}  // namespace detail
}  // namespace tg
