#pragma once
// A per-thread pool for the small objects every op makes: tensor handles, storages and tape
// nodes (with their shared_ptr control blocks). A steady loop then never calls malloc for them:
// a freed block goes on its thread's free list for its size class and is handed out again.
// A block may be freed on another thread than the one that made it (it joins that thread's
// list); each thread gives its cached blocks back to the system when it exits.

#include <cstddef>
#include <memory>

namespace tg::detail {

void* pool_allocate(std::size_t bytes);
void pool_deallocate(void* p, std::size_t bytes) noexcept;

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
