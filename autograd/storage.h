#pragma once
// Storage: one contiguous buffer, handed out by a caching allocator.
//
// Fresh pages are expensive on our machines (a first touch of 32 MB costs about 100 ms), so freed
// buffers go back to a per-thread cache bucketed by size and are handed out again; a steady
// training or benchmark loop stops asking the OS for memory after its first iterations (an
// optimizer's zero_grad() hands the gradients' buffers back to the cache for the next backward).
// The cache is thread-local: threads share no mutable allocator state.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tg {

class Storage {
 public:
  /// A buffer of at least `bytes` bytes, 64-byte aligned, contents unspecified. Throws
  /// std::bad_alloc when the OS refuses (Tensor turns it into a MemoryError naming the shape).
  explicit Storage(std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  /// Counts writes: every mutable access to the buffer bumps it, so a backward that saved the
  /// buffer can tell that it changed since (PyTorch's version counter; shared by views).
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_;
  uint64_t version_ = 0;
  std::size_t bytes_;     // what was asked for
  std::size_t capacity_;  // the bucket size actually held
};

/// Statistics of this thread's cache.
struct AllocatorStats {
  std::size_t cached_bytes = 0;     // held in the cache, free for reuse
  std::size_t os_allocations = 0;   // buffers obtained from the OS so far
  std::size_t cache_hits = 0;       // buffers served from the cache so far
};

AllocatorStats allocator_stats();
/// Gives every cached buffer of this thread back to the OS (and, with glibc, trims its heap).
void empty_cache();

}  // namespace tg
