#pragma once
// A per-thread pool for the small objects every op makes: tensor handles, storages, tape nodes
// (with their shared_ptr control blocks) and large backward closures. A steady loop then never
// calls malloc for them: a freed block goes on its thread's free list for its size class and
// is handed out again. A block may be freed on another thread than the one that made it (it
// joins that thread's list); each thread gives its cached blocks back to the system when it
// exits. The hit paths are inline: they run several times per op.

#include <cstddef>
#include <memory>

namespace tg::detail {

inline constexpr std::size_t kPoolGranule = 32;  // size classes of 32, 64, ..., 1024 bytes
inline constexpr std::size_t kPoolClasses = 32;
inline constexpr std::size_t kPoolMaxCached = 1 << 14;  // blocks kept per class and thread

struct PoolBlock {
  PoolBlock* next;
};
// Trivially constructible and destructible, so it stays usable while other thread-locals are
// destroyed; `ready` is set once the thread's releaser exists and cleared when it has run. In
// a library built with a sanitizer the lists stay empty and never ready (the sanitizer then
// sees every block's own malloc and free), so the inline paths below need no build flags.
struct PoolLists {
  PoolBlock* head[kPoolClasses];
  std::size_t count[kPoolClasses];
  bool ready;
  bool closed;
};
extern constinit thread_local PoolLists pool_lists;

void* pool_allocate_slow(std::size_t bytes);
void pool_deallocate_slow(void* p, std::size_t bytes) noexcept;

inline std::size_t pool_class(std::size_t bytes) { return (bytes - 1) / kPoolGranule; }

inline void* pool_allocate(std::size_t bytes) {
  const std::size_t c = pool_class(bytes);
  if (c < kPoolClasses) {
    if (PoolBlock* b = pool_lists.head[c]) {
      pool_lists.head[c] = b->next;
      --pool_lists.count[c];
      return b;
    }
  }
  return pool_allocate_slow(bytes);
}

inline void pool_deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t c = pool_class(bytes);
  if (c < kPoolClasses && pool_lists.ready && pool_lists.count[c] < kPoolMaxCached) {
    auto* b = static_cast<PoolBlock*>(p);
    b->next = pool_lists.head[c];
    pool_lists.head[c] = b;
    ++pool_lists.count[c];
    return;
  }
  pool_deallocate_slow(p, bytes);
}

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

/// std::make_shared, with the object and its control block from the pool.
template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  return std::allocate_shared<T>(PoolAllocator<T>{}, std::forward<Args>(args)...);
}

}  // namespace tg::detail
