#pragma once
#include <source_location>
#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Rotary position embedding in Hugging Face's half-split form (Llama's apply_rotary_pos_emb),
/// on the (..., T, H, d) layout a projection reshaped to heads has: position t rotates the pair
/// (x[i], x[i + d/2]) of every head by the angle whose cosine and sine are cos[t, i], sin[t, i]:
///   y[i] = x[i] cos - x[i + d/2] sin,   y[i + d/2] = x[i + d/2] cos + x[i] sin
/// that is x cos + rotate_half(x) sin with the tables repeated over both halves. cos and sin
/// are (T, d/2) constants of x's dtype (no gradient; nn::rope_tables makes them). Throws
/// ShapeError (x below rank 3, an odd d, tables not (T, d/2)), ValueError (dtypes differ, not
/// float32 or float64).
Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin,
              const std::source_location& where = std::source_location::current());
}  // namespace tg
