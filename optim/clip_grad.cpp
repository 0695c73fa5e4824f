#include <tapegrad/optim/clip_grad.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/ops/threads.h>

namespace tg::optim {

namespace {

// The sum of x_i^2 in double, in 16 running sums (vector registers of doubles, enough of them to
// hide the adds' latency), then theirs.
template <class T>
double sum_of_squares(const T* x, int64_t n) {
  constexpr int64_t kSums = 16;
  double sums[kSums] = {};
  int64_t i = 0;
  for (; i + kSums <= n; i += kSums)
#pragma omp simd
    for (int64_t k = 0; k < kSums; ++k) sums[k] += static_cast<double>(x[i + k]) * x[i + k];
  for (; i < n; ++i) sums[0] += static_cast<double>(x[i]) * x[i];
  double total = 0;
  for (const double s : sums) total += s;
  return total;
}

// Entries per block of a gradient's sum of squares: the threads share the blocks, each summed
// alike on any thread, and the blocks' sums are added in order, so the norm has the same bits
// whatever the team. The blocks go in groups of kGroup, their sums on the stack (no allocation:
// grad_norm throws nothing).
constexpr int64_t kBlock = detail::kPassParallelFrom;
constexpr int64_t kGroup = 64;

// The sum of x_i^2 over n entries, by blocks.
template <class T>
double blocked_sum_of_squares(const T* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks <= 1) return sum_of_squares(x, n);
  double total = 0;
  for (int64_t first = 0; first < blocks; first += kGroup) {
    const int64_t count = std::min(kGroup, blocks - first);
    double sums[kGroup];
    detail::for_parts(count, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t start = (first + b) * kBlock;
        sums[b] = sum_of_squares(x + start, std::min(kBlock, n - start));
      }
    }, 2);
    for (int64_t b = 0; b < count; ++b) total += sums[b];
  }
  return total;
}

}  // namespace

double grad_norm(const NamedTensors& params) {
  double sum_sq = 0;
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch(g.dtype(),
             [&]<class T>() { sum_sq += blocked_sum_of_squares(g.template data<T>(), g.numel()); });
  }
  return std::sqrt(sum_sq);
}

double clip_grad_norm(const NamedTensors& params, double max_norm) {
  if (!(max_norm >= 0))
    throw ValueError("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  const double total = grad_norm(params);
  if (!std::isfinite(total) || !(total > max_norm)) return total;
  const double coef = max_norm / (total + 1e-6);
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // A gradient recorded by create_graph, or sharing its buffer with another tensor, is not
    // ours to overwrite: scale a copy instead.
    if (!g.is_leaf() || g.impl().storage.use_count() != 1) {
      g = g.detach().clone();
      p.set_grad(g);
    }
    dispatch(g.dtype(), [&]<class T>() {
      T* dg = g.template data<T>();
      const T c = static_cast<T>(coef);
      detail::for_parts(g.numel(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dg[i] *= c;
      }, detail::kPassParallelFrom);
    });
  }
  return total;
}

}  // namespace tg::optim
