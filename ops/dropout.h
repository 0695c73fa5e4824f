#pragma once
#include <cstdint>
#include <source_location>

#include <tapegrad/autograd/tensor.h>

namespace tg {
/// Inverted dropout, as torch.nn.functional.dropout: in training each element is zeroed with
/// probability p (drawn from rng) and the rest scaled by 1 / (1 - p); in eval (training false)
/// or with p = 0 it returns x itself. dx = dy * mask / (1 - p). Throws ValueError for p outside
/// [0, 1].
Tensor dropout(const Tensor& x, double p, bool training, Rng& rng, const std::source_location& where = std::source_location::current());

namespace detail {
/// The least engine draw k with Rng::unit(k) >= p, for p in [0, 1): dropout keeps an entry
/// exactly when its draw is at least this one.
uint64_t first_kept_draw(double p);
}  // namespace detail
}  // namespace tg
