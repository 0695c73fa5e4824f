#pragma once
// Tensor: a cheap handle (a shared pointer) to a rank 0-4, row-major, contiguous array of float
// or double, with its place on the tape. Copies of a handle share data and gradient.

#include <cstdint>
#include <memory>
#include <random>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/autograd/dtype.h>
#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/shape.h>
#include <tapegrad/autograd/storage.h>

namespace tg {

class Node;
class Tensor;

struct TensorImpl {
  // User-provided, so that make_shared's value-initialisation runs the member initialisers
  // alone instead of first zeroing the whole block.
  TensorImpl() {}
  Shape shape;
  Dtype dtype = Dtype::f64;
  std::shared_ptr<Storage> storage;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;    // the op that made this tensor; null for a leaf
  std::shared_ptr<TensorImpl> grad; // accumulated gradient of a requires_grad leaf
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

  /// The same data, cut off from the tape (shares storage).
  Tensor detach() const;
  /// A deep copy of the data, on the tape as PyTorch's: its gradient flows back to this tensor
  /// (detach().clone() for a copy off the tape).
  Tensor clone(const std::source_location& where = std::source_location::current()) const;
  /// A copy converted to `dtype`, on the tape: the gradient comes back converted to this dtype.
  /// An int64 result is off the tape (not differentiable).
  Tensor to(Dtype dtype, const std::source_location& where = std::source_location::current()) const;

  /// Prints the values row by row (for demos and failure messages).
  std::string str(int precision = 4) const;

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
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform_(gen_); }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
};

Tensor zeros(const Shape& shape, Dtype dtype = Dtype::f64);
/// Zeros (ones) of x's shape and dtype, off the tape.
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor ones(const Shape& shape, Dtype dtype = Dtype::f64);
Tensor full(const Shape& shape, double value, Dtype dtype = Dtype::f64);
/// A rank-0 tensor.
Tensor scalar(double value, Dtype dtype = Dtype::f64);
/// A tensor from row-major values; throws ShapeError when the count does not match the shape.
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   Dtype dtype = Dtype::f64);
/// An int64 tensor (token indices) from row-major values; throws ShapeError on a count mismatch.
Tensor from_indices(const std::vector<int64_t>& values, const Shape& shape);
/// Standard normal entries times `stddev`.
Tensor randn(const Shape& shape, Rng& rng, Dtype dtype = Dtype::f64, double stddev = 1.0);
/// Uniform entries in [lo, hi).
Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi, Dtype dtype = Dtype::f64);

}  // namespace tg
