#include <tapegrad/data/uniform.h>

#include <limits>
#include <random>

namespace tg::data {

static_assert(std::mt19937_64::min() == 0 &&
                  std::mt19937_64::max() == std::numeric_limits<uint64_t>::max(),
              "uniform_below assumes the engine gives every 64-bit value");

uint64_t uniform_below(Rng& rng, uint64_t n) {
  if (n == 0) throw ValueError("uniform_below: the range [0, 0) is empty");
  // 2^64 mod n, computed in 64 bits as (2^64 - n) mod n.
  const uint64_t excess = (0 - n) % n;
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - excess;  // last kept draw
  uint64_t r = rng.engine()();
  while (r > limit) r = rng.engine()();
  return r % n;
}

}  // namespace tg::data
