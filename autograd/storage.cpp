#include <tapegrad/autograd/storage.h>

#include <bit>
#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <new>
#include <vector>

#include <tapegrad/autograd/sanitizers.h>
#if defined(TG_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace tg {

namespace {

// The cache keeps freed buffers and hands out buckets larger than asked, which would hide a
// use-after-free and an overrun into the slack from AddressSanitizer. Under ASan a buffer is
// therefore poisoned while cached, only the asked bytes are addressable while in use, and it is
// made addressable again just before it goes back to malloc. Without ASan these do nothing.
void poison(void* p, std::size_t bytes) {
#if defined(TG_ASAN)
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}
void unpoison(void* p, std::size_t bytes) {
#if defined(TG_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}
void release(void* p, std::size_t capacity) {
  unpoison(p, capacity);
  std::free(p);
}

constexpr std::size_t kAlign = 64;
constexpr std::size_t kMaxCachedBytes = std::size_t{4} << 30;  // per thread

// Sizes round up to one of four steps per power of two (at most 25% slack), all multiples of 64;
// small ones to 64, 128 or 256 bytes (a scalar's buffer is a cache line, not four).
std::size_t bucket_size(std::size_t bytes) {
  if (bytes <= 256) return bytes <= 64 ? 64 : bytes <= 128 ? 128 : 256;
  const int hi = std::bit_width(bytes - 1) - 1;  // 2^hi < bytes <= 2^(hi+1)
  const std::size_t step = std::size_t{1} << (hi - 2);
  return (bytes + step - 1) / step * step;
}

struct Cache {
  struct Entry {
    std::size_t size;
    void* ptr;
  };
  std::vector<Entry> free;  // few distinct sizes in practice: a linear scan is enough
  AllocatorStats stats;

  ~Cache() {
    release_all();
    destroyed = true;
  }
  void release_all() {
    for (auto& e : free) release(e.ptr, e.size);
    free.clear();
    stats.cached_bytes = 0;
  }
  static thread_local bool destroyed;
};
thread_local bool Cache::destroyed = false;

Cache& cache() {
  static thread_local Cache c;
  return c;
}

}  // namespace

Storage::Storage(std::size_t bytes) : bytes_(bytes), capacity_(bucket_size(bytes)) {
  if (!Cache::destroyed) {
    Cache& c = cache();
    for (std::size_t i = 0; i < c.free.size(); ++i) {
      if (c.free[i].size == capacity_) {
        data_ = c.free[i].ptr;
        c.free[i] = c.free.back();
        c.free.pop_back();
        c.stats.cached_bytes -= capacity_;
        ++c.stats.cache_hits;
        unpoison(data_, bytes_);  // the slack past bytes_ stays poisoned
        return;
      }
    }
    ++c.stats.os_allocations;
  }
  data_ = std::aligned_alloc(kAlign, capacity_);
  if (!data_) throw std::bad_alloc();
  poison(static_cast<char*>(data_) + bytes_, capacity_ - bytes_);
}

Storage::~Storage() {
  if (Cache::destroyed) {
    release(data_, capacity_);
    return;
  }
  Cache& c = cache();
  if (c.stats.cached_bytes + capacity_ > kMaxCachedBytes) c.release_all();
  try {
    c.free.push_back({capacity_, data_});  // may need memory: refused, the buffer goes back
  } catch (const std::bad_alloc&) {       // to the OS (a destructor may run while a
    release(data_, capacity_);              // MemoryError unwinds)
    return;
  }
  poison(data_, capacity_);
  c.stats.cached_bytes += capacity_;
}

AllocatorStats allocator_stats() { return Cache::destroyed ? AllocatorStats{} : cache().stats; }

void empty_cache() {
  if (!Cache::destroyed) cache().release_all();
#ifdef __GLIBC__
  malloc_trim(0);  // and what glibc kept of freed nodes and tensors: back to the OS for real
#endif
}

}  // namespace tg
