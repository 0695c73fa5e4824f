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
// small ones to 64, 128 or 256 bytes (a scalar's buffer is a cache line, not four). Each size has
// its place in the cache: 64, 128, 256, then 320, 384, 448, 512 (steps k x 2^(hi-2) for k = 5 to
// 8 above 2^hi), and so on up to 2^63 bytes. More is refused (std::bad_alloc: a MemoryError for
// a tensor, whose byte count stays below 2^63 anyway).
constexpr std::size_t kMaxBytes = std::size_t{1} << 63;
std::size_t bucket_size(std::size_t bytes) {
  if (bytes > kMaxBytes) throw std::bad_alloc();
  if (bytes <= 256) return bytes <= 64 ? 64 : bytes <= 128 ? 128 : 256;
  const int hi = std::bit_width(bytes - 1) - 1;  // 2^hi < bytes <= 2^(hi+1), hi <= 62
  const std::size_t step = std::size_t{1} << (hi - 2);
  return (bytes + step - 1) / step * step;
}
constexpr int kBuckets = 3 + (63 - 8) * 4;  // the last is 2^63's
constexpr int bucket_index(std::size_t capacity) {
  if (capacity <= 256) return capacity == 64 ? 0 : capacity == 128 ? 1 : 2;
  const int hi = std::bit_width(capacity - 1) - 1;
  const std::size_t k = capacity >> (hi - 2);  // 5 to 8
  return 3 + (hi - 8) * 4 + static_cast<int>(k - 5);
}
constexpr std::size_t capacity_of(int b) {  // bucket_index's inverse
  if (b < 3) return std::size_t{64} << b;
  const int hi = 8 + (b - 3) / 4;
  const std::size_t k = 5 + (b - 3) % 4;
  return k << (hi - 2);
}
static_assert([] {
  for (int b = 0; b < kBuckets; ++b)
    if (bucket_index(capacity_of(b)) != b || (b > 0 && capacity_of(b) <= capacity_of(b - 1)))
      return false;
  return capacity_of(kBuckets - 1) == kMaxBytes;
}());

struct Cache {
  // The freed buffers of each bucket size, the last freed on top (still warm in the caches):
  // found in one step whatever else the cache holds (a list scanned for the size took longer
  // the more sizes a model had left in it).
  std::vector<void*> free[kBuckets];
  AllocatorStats stats;

  ~Cache() {
    release_all();
    destroyed = true;
  }
  void release_all() {
    for (int b = 0; b < kBuckets; ++b) {
      for (void* p : free[b]) release(p, capacity_of(b));
      free[b].clear();
    }
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
    if (std::vector<void*>& f = c.free[bucket_index(capacity_)]; !f.empty()) {
      data_ = f.back();
      f.pop_back();
      c.stats.cached_bytes -= capacity_;
      ++c.stats.cache_hits;
      unpoison(data_, bytes_);  // the slack past bytes_ stays poisoned
      return;
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
    c.free[bucket_index(capacity_)].push_back(data_);  // may need memory: refused, the buffer
  } catch (const std::bad_alloc&) {                    // goes back to the OS (a destructor may
    release(data_, capacity_);                         // run while a MemoryError unwinds)
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
