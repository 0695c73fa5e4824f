#pragma once
// A hand-written, tape-free forward+backward of the benchmarked attention (multi-head, W_O,
// L = 0.5 * sum(Y^2)), in plain Eigen with buffers allocated once: what the tape itself costs is
// the difference between this and tapegrad.

#include <cstdint>
#include <memory>

namespace tg::bench {

template <class T>
class AttentionBaseline {
 public:
  AttentionBaseline(int64_t B, int64_t T_, int64_t D, int64_t H, uint64_t seed);
  ~AttentionBaseline();
  /// One forward and backward; returns the loss.
  T run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tg::bench
