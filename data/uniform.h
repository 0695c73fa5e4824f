#pragma once
// Uniform random integers that are the same on every platform. std::uniform_int_distribution's
// algorithm is left to each standard library, so a seed would give libstdc++ and libc++ users
// different batches; std::mt19937_64's output sequence, by contrast, is fixed by the standard.

#include <cstdint>

#include <tapegrad/autograd/tensor.h>

namespace tg::data {

/// A uniform integer in [0, n) from rng's engine by rejection sampling: a 64-bit draw r is kept
/// when r < 2^64 - (2^64 mod n), the largest multiple of n, and the result is r mod n (so there
/// is no modulo bias). Usually one draw. Throws ValueError when n is 0.
uint64_t uniform_below(Rng& rng, uint64_t n);

}  // namespace tg::data
