#include <tapegrad/autograd/pool.h>

#include <cstdlib>
#include <new>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/sanitizers.h>

namespace tg::detail {

constinit thread_local PoolLists pool_lists{};

namespace {

#if defined(TG_ASAN) || defined(TG_TSAN)
constexpr bool kPoolBypass = true;  // sanitizers see every object's own malloc and free
#else
constexpr bool kPoolBypass = false;
#endif

// Empties this thread's lists when it exits; from then on every block goes to malloc and free.
struct Releaser {
  ~Releaser() {
    pool_lists.ready = false;
    pool_lists.closed = true;
    for (std::size_t c = 0; c < kPoolClasses; ++c) {
      while (PoolBlock* b = pool_lists.head[c]) {
        pool_lists.head[c] = b->next;
        std::free(b);
      }
      pool_lists.count[c] = 0;
    }
  }
};

// Registers this thread's releaser (once), so that its lists may start holding blocks.
void make_ready() {
  if (kPoolBypass || pool_lists.ready || pool_lists.closed) return;
  thread_local Releaser releaser;  // constructed once per thread, destroyed at its exit
  (void)releaser;
  pool_lists.ready = true;
}

}  // namespace

void* pool_allocate_slow(std::size_t bytes) {
  const std::size_t c = pool_class(bytes);
  if (!kPoolBypass && c < kPoolClasses) {
    make_ready();
    // The class's full size, so that the block can serve any request of its class (it may
    // join a list on another thread even when this one's lists are closed).
    bytes = (c + 1) * kPoolGranule;
  }
  void* p = std::malloc(bytes);
  if (!p)
    throw MemoryError("the tape: out of memory for a block of %zu bytes (a tensor handle, a "
                      "storage or a node); free graphs you no longer need", bytes);
  return p;
}

// A thread whose lists are not ready (it never allocated from the pool, or it is exiting, or
// the list is full) hands the block straight back to the system.
void pool_deallocate_slow(void* p, std::size_t) noexcept { std::free(p); }

}  // namespace tg::detail
