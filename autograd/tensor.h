#pragma once
// Tensor: a cheap handle (a shared pointer) to a rank 0-6, row-major, contiguous array of float
// or double, with its place on the tape. Copies of a handle share data and gradient.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <random>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tapegrad/autograd/dtype.h>
#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/hooks.h>
#include <tapegrad/autograd/shape.h>
#include <tapegrad/autograd/storage.h>

namespace tg {

class Node;
class Tensor;
namespace detail {
struct HookList;
}

struct TensorImpl {
  // User-provided, so that make_shared's value-initialisation runs the member initialisers
  // alone instead of first zeroing the whole block.
  TensorImpl() {}
  /// Its node, when this held the last reference, joins the thread's queue of nodes to free
  /// (tape.cpp): a tensor a closure saved frees its graph in that loop too, not by recursion.
  ~TensorImpl();
  Shape shape;
  Dtype dtype = Dtype::f64;
  std::shared_ptr<Storage> storage;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;    // the op that made this tensor; null for a leaf
  std::shared_ptr<TensorImpl> grad; // accumulated gradient of a requires_grad leaf
  std::shared_ptr<detail::HookList> hooks;  // a leaf's gradient hooks (a non-leaf's: its node's)
  std::shared_ptr<TensorImpl> tangent;      // forward mode: J t, seen only at tangent_level
  uint64_t tangent_level = 0;               // (autograd/forward_ad.h)
};

class Tensor {
 public:
  Tensor() = default;  // undefined; defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  /// A new tensor with uninitialised contents (from the caching allocator). Throws ShapeError
  /// when the byte count overflows, MemoryError when the OS refuses the memory.
  Tensor(const Shape& shape, Dtype dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return impl().shape.rank(); }
  /// Size of one axis; a negative axis counts from the end. Throws ShapeError when out of range.
  int64_t size(int axis) const { return shape()[normalize_axis(axis, shape(), "size")]; }
  int64_t numel() const { return impl().shape.numel(); }
  Dtype dtype() const { return impl().dtype; }

  /// Read access to the elements; throws ValueError when T is not the tensor's dtype.
  template <class T>
  const T* data() const {
    if (dtype() != dtype_of<T>()) throw_dtype_error(dtype_of<T>());
    return static_cast<const T*>(impl().storage->data());
  }
  /// Write access to the elements (through a non-const handle): bumps the version of the
  /// buffer, so a backward that saved this tensor before the write refuses to run on the new
  /// values (GraphError naming the op). Throws ValueError when T is not the tensor's dtype.
  template <class T>
  T* data() {
    if (dtype() != dtype_of<T>()) throw_dtype_error(dtype_of<T>());
    impl().storage->bump_version();
    return static_cast<T*>(impl().storage->data());
  }
  /// Writes one element at a multi-index (converted to the dtype); bumps the version. Throws
  /// ShapeError when out of range.
  void set(std::initializer_list<int64_t> index, double value);
  /// The version of the buffer (see data()).
  uint64_t version() const { return impl().storage->version(); }
  /// The value of a one-element tensor, as double; throws ShapeError otherwise.
  double item() const;
  /// Element at a multi-index (rank entries), as double; throws ShapeError when out of range.
  double at(std::initializer_list<int64_t> index) const;
  /// All elements in row-major order, as double.
  std::vector<double> to_vector() const;

  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as collecting gradients; throws GraphError on a non-leaf, ValueError on an
  /// int64 or bool tensor.
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  /// Name of the op that made this tensor ("" for a leaf).
  std::string op_name() const;

  /// The accumulated gradient of a leaf, or an undefined tensor before any backward.
  Tensor grad() const;
  /// Zeroes the accumulated gradient in place (keeps its buffer).
  void zero_grad() const;
  /// Replaces the accumulated gradient (undefined clears it).
  void set_grad(const Tensor& g) const;

  /// Reverse-mode differentiation from this tensor into the grad() of every requires_grad leaf.
  /// A non-scalar needs grad_output of the same shape. retain_graph keeps the graph for another
  /// backward; create_graph records the backward pass itself (grad-of-grad). Throws GraphError
  /// (freed graph, no grad required, non-scalar without grad_output) or ShapeError.
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false,
                bool create_graph = false,
                const std::source_location& where = std::source_location::current()) const;

  /// Registers fn to see, and perhaps replace, the gradient flowing into this tensor in every
  /// later backward (autograd/hooks.h). Throws GraphError when the tensor does not require grad.
  HookHandle register_hook(GradHook fn) const;
  /// Makes a non-leaf keep its gradient in grad() after a backward, accumulated as a leaf's
  /// (PyTorch's retain_grad); a no-op on a leaf. Throws GraphError when it does not require grad.
  void retain_grad() const;

  /// The same data, cut off from the tape (shares storage).
  Tensor detach() const;
  /// A deep copy of the data, on the tape as PyTorch's: its gradient flows back to this tensor
  /// (detach().clone() for a copy off the tape).
  Tensor clone(const std::source_location& where = std::source_location::current()) const;
  /// A copy converted to `dtype`, on the tape: the gradient comes back converted to this dtype.
  /// An int64 result is off the tape (not differentiable).
  Tensor to(Dtype dtype, const std::source_location& where = std::source_location::current()) const;

  /// The values as PyTorch prints them (torch/_tensor_str.py, precision 4, line width 80):
  /// `tensor([[1.5000, 2.0000], ...])`, int64 as integers, scientific notation when the
  /// magnitudes call for it, and past 1000 elements only the first and last 3 entries of each
  /// axis around `...`. The suffixes are PyTorch's, with tapegrad's names: `dtype=float64` (when
  /// not the default dtype or int64), `size=(0, 3)` (empty), `requires_grad=True` (a leaf),
  /// `grad_fn=<matmul>` (the op that made it).
  std::string str(int precision = 4) const;  // ValueError outside [0, 30]

  TensorImpl& impl() const {
    if (!impl_) throw_undefined();
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  double to_double(int64_t flat) const;
  int64_t flat_index(std::initializer_list<int64_t> index, const char* who) const;
  [[noreturn]] static void throw_undefined();
  [[noreturn]] void throw_dtype_error(Dtype asked) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// Tensors by name, in a fixed order: a module's parameters, a state dict, a checkpoint's entries.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Seeded random numbers for tests and examples (std::mt19937_64 underneath).
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double normal() { return normal_(gen_); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(gen_()); }
  std::mt19937_64& engine() { return gen_; }
  /// The number in [0, 1) that uniform(0, 1) makes of one engine draw: the draw rounded to a
  /// double, over 2^64, and a result that rounds up to 1 taken as the largest double below it.
  /// These are the numbers libstdc++'s std::uniform_real_distribution<double> makes of this
  /// engine (its generate_canonical), without the two long-double logarithms it takes for each.
  /// Non-decreasing in the draw.
  static double unit(uint64_t draw) {
    const double u = static_cast<double>(draw) * 0x1p-64;
    return u < 1.0 ? u : 0x1.fffffffffffffp-1;
  }

 private:
  std::mt19937_64 gen_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

// Factories. Without a dtype, the floating ones make get_default_dtype() (float32 unless set).

Tensor zeros(const Shape& shape, Dtype dtype = get_default_dtype());
/// Zeros (ones) of x's shape and dtype, off the tape.
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor ones(const Shape& shape, Dtype dtype = get_default_dtype());
/// Every entry `value` (converted to the dtype), as torch.full. Unlike torch.full, an integer
/// value does not make int64: pass Dtype::i64.
Tensor full(const Shape& shape, double value, Dtype dtype = get_default_dtype());
/// A rank-0 tensor.
Tensor scalar(double value, Dtype dtype = get_default_dtype());
/// A tensor from row-major values; throws ShapeError when the count does not match the shape.
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   Dtype dtype = get_default_dtype());
/// An int64 tensor (token indices) from row-major values; throws ShapeError on a count mismatch.
Tensor from_indices(const std::vector<int64_t>& values, const Shape& shape);
/// A bool tensor (a mask for where and masked_fill) of `values` in row-major order. Throws
/// ShapeError when their count is not the shape's.
Tensor from_bools(const std::vector<bool>& values, const Shape& shape);
/// Standard normal entries times `stddev`.
Tensor randn(const Shape& shape, Rng& rng, Dtype dtype = get_default_dtype(), double stddev = 1.0);
/// Uniform entries in [lo, hi).
Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi,
               Dtype dtype = get_default_dtype());
/// Uniform entries in [0, 1), as torch.rand.
Tensor rand(const Shape& shape, Rng& rng, Dtype dtype = get_default_dtype());
/// Uniform integers in [low, high), as torch.randint (int64 unless told; every integer equally
/// likely, the same on every platform). Throws ValueError when low >= high.
Tensor randint(int64_t low, int64_t high, const Shape& shape, Rng& rng, Dtype dtype = Dtype::i64);
/// The (n, m) identity (m = n by default), as torch.eye. Throws ValueError for n or m < 0.
Tensor eye(int64_t n, Dtype dtype = get_default_dtype());
Tensor eye(int64_t n, int64_t m, Dtype dtype = get_default_dtype());
/// `steps` values from start to end inclusive, evenly spaced, as torch.linspace (steps 1 gives
/// {start}, steps 0 an empty tensor). Throws ValueError for steps < 0.
Tensor linspace(double start, double end, int64_t steps, Dtype dtype = get_default_dtype());

/// start, start + step, ... while below end (above it for a negative step), as torch.arange:
/// ceil((end - start) / step) values. Throws ValueError for step 0, a step whose sign points
/// away from end, or a non-finite bound.
Tensor arange(double start, double end, double step, Dtype dtype);
/// 0, 1, ..., end - 1 in `dtype`.
Tensor arange(double end, Dtype dtype);
namespace detail {
Tensor arange_i64(int64_t start, int64_t end, int64_t step);
template <class... A>
concept Numbers = (std::is_arithmetic_v<A> && ...) && (!std::is_same_v<A, bool> && ...);
}  // namespace detail
/// arange as PyTorch types it: int64 when start, end and step are all integers, the default
/// dtype when any of them is floating (`arange(5)` is int64, `arange(0, 1, 0.25)` float32).
template <class S, class E, class St>
  requires detail::Numbers<S, E, St>
Tensor arange(S start, E end, St step) {
  if constexpr (std::is_integral_v<S> && std::is_integral_v<E> && std::is_integral_v<St>)
    return detail::arange_i64(start, end, step);
  else
    return arange(static_cast<double>(start), static_cast<double>(end),
                  static_cast<double>(step), get_default_dtype());
}
template <class S, class E>
  requires detail::Numbers<S, E>
Tensor arange(S start, E end) {
  return arange(start, end, 1);
}
template <class E>
  requires detail::Numbers<E>
Tensor arange(E end) {
  return arange(0, end, 1);
}

/// x.str(): PyTorch's layout, `tensor([...])`.
std::ostream& operator<<(std::ostream& os, const Tensor& x);
/// shape.str(): `(3, 2)`.
std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace tg
