#include "autograd/pool.h"

#include <cstdlib>
#include <new>

namespace tg::detail {

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kBypass = true;  // sanitizers see every object's own malloc and free
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kBypass = true;
#else
constexpr bool kBypass = false;
#endif
#else
constexpr bool kBypass = false;
#endif

constexpr std::size_t kGranule = 32;      // size classes of 32, 64, ..., 512 bytes
constexpr std::size_t kClasses = 16;
constexpr std::size_t kMaxCached = 1 << 14;  // blocks kept per class and thread

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so it stays usable while other thread-locals are destroyed; the
// Releaser below empties it at thread exit and marks it closed.
struct FreeLists {
  FreeBlock* head[kClasses];
  std::size_t count[kClasses];
  bool registered;
  bool closed;
};
thread_local FreeLists lists{};

struct Releaser {
  ~Releaser() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        std::free(b);
      }
      lists.count[c] = 0;
    }
    lists.closed = true;
  }
};

std::size_t size_class(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }

}  // namespace

void* pool_allocate(std::size_t bytes) {
  const std::size_t c = size_class(bytes);
  if (!kBypass && c < kClasses && !lists.closed) {
    if (FreeBlock* b = lists.head[c]) {
      lists.head[c] = b->next;
      --lists.count[c];
      return b;
    }
    if (!lists.registered) {
      thread_local Releaser releaser;  // constructed once per thread, destroyed at its exit
      (void)releaser;
      lists.registered = true;
    }
    bytes = (c + 1) * kGranule;
  }
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void pool_deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t c = size_class(bytes);
  if (!kBypass && c < kClasses && !lists.closed && lists.registered && lists.count[c] < kMaxCached) {
    auto* b = static_cast<FreeBlock*>(p);
    b->next = lists.head[c];
    lists.head[c] = b;
    ++lists.count[c];
    return;
  }
  std::free(p);
}

}  // namespace tg::detail
