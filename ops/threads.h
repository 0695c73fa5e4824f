#pragma once
// How many threads the parallel kernels use: the fused attention's OpenMP loop over (batch, head)
// entries and BLIS inside large matrix products (ops/gemm.cpp).
//
// Those kernels wait for one another at barriers that spin (BLIS's, without even a pause), so a
// team with more threads than free cores does not just lose its share: whenever one of its
// threads is descheduled, the others spin until it runs again (docs/PERFORMANCE.md, "A busy
// machine"). So the count set here is a ceiling: every 200 ms the library reads how much CPU time
// other processes took on the cores it may run on (/proc/stat, less its own) and uses only the
// cores they left free, at least one. Results do not depend on the thread count.

#include <cstdint>
#include <string_view>
#include <vector>

namespace tg {

/// At most n threads for the parallel kernels (per calling thread, as OpenMP's count), fewer
/// while other processes keep cores busy. Throws ValueError for n < 1.
void set_num_threads(int n);
/// The ceiling set by set_num_threads (OpenMP's count by default: every core).
int num_threads();

/// Whether the thread count follows the cores other processes leave free (on by default). Off,
/// every parallel kernel uses num_threads() threads, busy machine or not (for tests that must
/// run a given team size). Applies to every thread.
void set_thread_adaptation(bool on);
bool thread_adaptation();

namespace detail {

/// The team a parallel kernel starts now, outside any parallel region: num_threads(), limited
/// to the free cores while adaptation is on. Cheap (a clock read) except once per 200 ms.
int team_size();

/// A callable taking (begin, end), by address, without an allocation (see for_parts).
struct PartsBody {
  const void* f;
  void (*call)(const void* f, int64_t begin, int64_t end);
};
void for_parts(int64_t n, PartsBody body, int64_t serial_below);

/// f(begin, end) for the parts of [0, n), one contiguous part per thread of a team_size() team:
/// the passes over memory of the large elementwise kernels. Below `serial_below` entries, one
/// part on the calling thread (a team costs more than it saves there).
template <class F>
void for_parts(int64_t n, const F& f, int64_t serial_below = int64_t{1} << 18) {
  const auto call = [](const void* g, int64_t b, int64_t e) { (*static_cast<const F*>(g))(b, e); };
  for_parts(n, PartsBody{&f, call}, serial_below);
}

/// Entries from which the passes over memory that run in every model's step share their parts
/// among the threads (the broadcasting binary ops, gelu, layer_norm, AdamW's update): at two
/// threads the GPT step's (768, 128) activations ran on one thread while the other waited
/// (docs/PERFORMANCE.md, "The GPT step on the Zen 5").
inline constexpr int64_t kPassParallelFrom = int64_t{1} << 15;

/// for_parts' `serial_below` for such a pass counted in units (rows, blocks, chunks) of
/// `unit_entries` entries each: one part on the calling thread while units * unit_entries is
/// under kPassParallelFrom (a last partial unit counted whole), else units shared from two on.
inline int64_t pass_serial_below(int64_t unit_entries) {
  const int64_t u = unit_entries < 1 ? 1 : unit_entries;
  const int64_t units = (kPassParallelFrom + u - 1) / u;  // units * u < kPassParallelFrom below it
  return units < 2 ? 2 : units;
}

/// f(start, m) for the chunks of [0, n), `chunk` entries each (the last may be shorter), the
/// chunks on the team as a pass over memory (pass_serial_below): a chunk's entries start at the
/// same place whatever the team, so vectorised kernels give the same bits on any thread count.
template <class F>
void for_chunks(int64_t n, int64_t chunk, const F& f) {
  for_parts(
      (n + chunk - 1) / chunk,
      [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c)
          f(c * chunk, n - c * chunk < chunk ? n - c * chunk : chunk);
      },
      pass_serial_below(chunk));
}

/// The team for `wanted` threads when `cores` cores may be used and other processes kept
/// `others_busy` of them busy: one per core that others used less than a quarter of, at least
/// one. (The decision alone, for tests.)
int team_for(int wanted, int cores, double others_busy);

/// Busy seconds of the CPUs k with cpus[k] set, from the cpu0, cpu1, ... lines of a /proc/stat
/// text (clock ticks, ticks_per_s of them a second): user, nice, system, irq, softirq and steal
/// time. -1 when the text has no line for any of them. (The parser alone, for tests.)
double busy_seconds(std::string_view proc_stat, const std::vector<bool>& cpus,
                    double ticks_per_s);

}  // namespace detail

}  // namespace tg
