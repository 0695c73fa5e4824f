#pragma once
// BackwardFn: a node's backward closure, (dY, Y) -> Grads, move-only, called as const (a
// closure must not be `mutable`: a retained graph may run it again). Unlike std::function,
// whose buffer holds 16 bytes, it keeps closures of up to kInline bytes aligned as a pointer
// (an op's saved tensors and flags: matmul's is 40) inside the node itself, and others in a
// block from the per-thread pool (16-byte aligned, as malloc's), so recording an op never calls
// malloc. (Closures aligned past max_align_t, rare, get their own aligned allocation.)

#include <array>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include <tapegrad/autograd/pool.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {

/// Inputs a node takes: enough for an LSTM or GRU cell (x, h, two weights, two biases) and a
/// fused op with a few saved options.
inline constexpr int kMaxInputs = 8;
/// Gradients for an op's inputs, in order; undefined for an input that needs none.
using Grads = std::array<Tensor, kMaxInputs>;
/// Forward mode: the tangents of an op's inputs, in order; undefined for an input without one.
using Tangents = std::array<Tensor, kMaxInputs>;

class BackwardFn {
 public:
  static constexpr std::size_t kInline = 64;

  BackwardFn() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, BackwardFn>>>
  explicit BackwardFn(F&& f) {
    emplace(std::forward<F>(f));
  }
  /// Replaces the closure with f, built in place.
  template <class F>
  void emplace(F&& f) {
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_r_v<Grads, const Fn&, const Tensor&, const Tensor&>);
    reset();
    if constexpr (fits_inline<Fn>()) {
      ::new (buf_) Fn(std::forward<F>(f));
    } else {
      void* block = allocate<Fn>();
      try {
        ::new (block) Fn(std::forward<F>(f));
      } catch (...) {
        deallocate<Fn>(block);
        throw;
      }
      *reinterpret_cast<void**>(buf_) = block;
    }
    ops_ = &kOps<Fn>;
  }
  BackwardFn(BackwardFn&& o) noexcept { take(o); }
  BackwardFn& operator=(BackwardFn&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  BackwardFn(const BackwardFn&) = delete;
  BackwardFn& operator=(const BackwardFn&) = delete;
  ~BackwardFn() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  Grads operator()(const Tensor& dY, const Tensor& Y) const { return ops_->call(buf_, dY, Y); }
  /// Destroys the closure (and what it holds).
  void reset() noexcept {
    if (ops_) std::exchange(ops_, nullptr)->destroy(buf_);
  }

 private:
  struct Ops {
    Grads (*call)(const std::byte* buf, const Tensor& dY, const Tensor& Y);
    void (*move)(std::byte* from, std::byte* to) noexcept;  // leaves `from` destroyed
    void (*destroy)(std::byte* buf) noexcept;
  };

  template <class Fn>
  static constexpr bool fits_inline() {
    return sizeof(Fn) <= kInline && alignof(Fn) <= alignof(void*) &&
           std::is_nothrow_move_constructible_v<Fn>;
  }
  template <class Fn>
  static constexpr bool over_aligned() {
    return alignof(Fn) > alignof(std::max_align_t);
  }
  template <class Fn>
  static void* allocate() {
    if constexpr (over_aligned<Fn>())
      return ::operator new(sizeof(Fn), std::align_val_t{alignof(Fn)});
    else
      return detail::pool_allocate(sizeof(Fn));
  }
  template <class Fn>
  static void deallocate(void* p) noexcept {
    if constexpr (over_aligned<Fn>())
      ::operator delete(p, sizeof(Fn), std::align_val_t{alignof(Fn)});
    else
      detail::pool_deallocate(p, sizeof(Fn));
  }
  template <class Fn>
  static Fn* target(std::byte* buf) {
    if constexpr (fits_inline<Fn>())
      return std::launder(reinterpret_cast<Fn*>(buf));
    else
      return static_cast<Fn*>(*reinterpret_cast<void**>(buf));
  }
  template <class Fn>
  static constexpr Ops kOps{
      [](const std::byte* buf, const Tensor& dY, const Tensor& Y) -> Grads {
        return (*target<Fn>(const_cast<std::byte*>(buf)))(dY, Y);
      },
      [](std::byte* from, std::byte* to) noexcept {
        if constexpr (fits_inline<Fn>()) {
          Fn* f = target<Fn>(from);
          ::new (to) Fn(std::move(*f));
          f->~Fn();
        } else {
          *reinterpret_cast<void**>(to) = *reinterpret_cast<void**>(from);
        }
      },
      [](std::byte* buf) noexcept {
        Fn* f = target<Fn>(buf);
        f->~Fn();
        if constexpr (!fits_inline<Fn>()) deallocate<Fn>(f);
      }};

  void take(BackwardFn& o) noexcept {
    if (o.ops_) {
      o.ops_->move(o.buf_, buf_);
      ops_ = std::exchange(o.ops_, nullptr);
    }
  }

  // (Aligned as a pointer, not as max_align_t: a closure of tensors and flags needs no more, and
  // the node holding two of these is 16 bytes smaller. A closure that needs more goes to a block.)
  alignas(void*) std::byte buf_[kInline];
  const Ops* ops_ = nullptr;
};

}  // namespace tg
