#include <tapegrad/autograd/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/pool.h>

namespace tg {

Tensor::Tensor(const Shape& shape, Dtype dtype) : impl_(detail::make_pooled<TensorImpl>()) {
  impl_->shape = shape;
  impl_->dtype = dtype;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(shape.numel(), static_cast<int64_t>(dtype_size(dtype)), &bytes))
    throw ShapeError("Tensor: shape " + shape.str() + " " + dtype_name(dtype) +
                     " needs more bytes than fit in int64");
  try {
    impl_->storage = detail::make_pooled<Storage>(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    // The message is formatted in place: making strings may fail too when memory is gone.
    char dims[160] = "(";
    for (int d = 0, at = 1; d < shape.rank() && at < 150; ++d)
      at += std::snprintf(dims + at, sizeof dims - at, d ? ", %lld" : "%lld",
                          static_cast<long long>(shape[d]));
    throw MemoryError("Tensor: out of memory for shape %s%s) %s (%lld bytes)", dims,
                      shape.rank() == 1 ? "," : "",
                      dtype_name(dtype), static_cast<long long>(bytes));
  }
}

void throw_not_floating(Dtype d) {
  throw ValueError(std::string("expected a float32 or float64 tensor, got ") + dtype_name(d) +
                   (d == Dtype::b8 ? " (bool tensors are masks: only where and masked_fill take them)"
                                   : " (int64 tensors hold indices: only the index ops take them)"));
}

void Tensor::throw_undefined() { throw ValueError("Tensor: use of an undefined tensor"); }

void Tensor::throw_dtype_error(Dtype asked) const {
  throw ValueError(std::string("Tensor::data: tensor is ") + dtype_name(dtype()) + ", asked for " +
                   dtype_name(asked));
}

double Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: tensor of shape " + shape().str() + " has " +
                     std::to_string(numel()) + " elements, not 1");
  return to_double(0);
}

double Tensor::to_double(int64_t flat) const {
  return dispatch_any(dtype(), [&]<class T>() { return static_cast<double>(data<T>()[flat]); });
}

void Tensor::set(std::initializer_list<int64_t> index, double value) {
  const int64_t flat = flat_index(index, "set");
  dispatch_any(dtype(), [&]<class T>() { data<T>()[flat] = static_cast<T>(value); });
}

int64_t Tensor::flat_index(std::initializer_list<int64_t> index, const char* who) const {
  const Shape& s = shape();
  if (static_cast<int>(index.size()) != s.rank())
    throw ShapeError(std::string(who) + ": " + std::to_string(index.size()) +
                     " indices for shape " + s.str());
  int64_t flat = 0, i = 0;
  for (int64_t k : index) {
    if (k < 0 || k >= s[i])
      throw ShapeError(std::string(who) + ": index " + std::to_string(k) +
                       " out of range for axis " + std::to_string(i) + " of shape " + s.str());
    flat = flat * s[i] + k;
    ++i;
  }
  return flat;
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  return to_double(flat_index(index, "at"));
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> v(numel());
  for (int64_t i = 0; i < numel(); ++i) v[i] = to_double(i);
  return v;
}

Tensor& Tensor::set_requires_grad(bool on) {
  if (!is_leaf())
    throw GraphError("set_requires_grad: only a leaf can be marked; this tensor was made by '" +
                     op_name() + "' (use detach() for a new leaf)");
  if (on && !is_floating(dtype()))
    throw ValueError(std::string("set_requires_grad: only float32 and float64 tensors can require "
                                 "grad; this one is ") + dtype_name(dtype()) + " " +
                     shape().str() + " (indices and masks are not differentiable)");
  impl().requires_grad = on;
  return *this;
}

std::string Tensor::op_name() const { return impl().grad_fn ? impl().grad_fn->op : ""; }

Tensor Tensor::grad() const { return Tensor(impl().grad); }

void Tensor::zero_grad() const {
  auto& g = impl().grad;
  if (!g) return;
  if (g->grad_fn || g->storage.use_count() != 1) {  // recorded (create_graph) or shared: not
                                                      // ours to overwrite in place
    g = zeros(g->shape, g->dtype).impl_ptr();
    return;
  }
  g->storage->bump_version();
  std::memset(g->storage->data(), 0, g->shape.numel() * dtype_size(g->dtype));
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    throw ShapeError("set_grad: gradient " + g.shape().str() + " " + dtype_name(g.dtype()) +
                     " does not match tensor " + shape().str() + " " + dtype_name(dtype()));
  impl().grad = g.impl_ptr();
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph,
                      const std::source_location& where) const {
  // A recorded backward refers back to the forward nodes, so create_graph keeps the graph.
  detail::run_backward({.outputs = std::span(this, 1),
                        .grad_outputs = std::span(&grad_output, 1),
                        .retain_graph = retain_graph || create_graph,
                        .create_graph = create_graph,
                        .where = where});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool create_graph,
                         std::optional<bool> retain_graph, const std::source_location& where) {
  for (const Tensor& x : inputs)
    if (!x.requires_grad())
      throw GraphError("grad: an input of shape " + x.shape().str() + " does not require grad");
  return detail::run_backward({.outputs = outputs, .grad_outputs = grad_outputs, .inputs = &inputs,
                               .retain_graph = retain_graph.value_or(create_graph),
                               .create_graph = create_graph,
                               .where = where});
}

Tensor Tensor::detach() const {
  auto p = detail::make_pooled<TensorImpl>();
  p->shape = shape();
  p->dtype = dtype();
  p->storage = impl().storage;
  return Tensor(std::move(p));
}

// clone: Y = X;  dX = dY;  tY = tX
Tensor Tensor::clone(const std::source_location& where) const {
  Tensor out(shape(), dtype());
  std::memcpy(out.impl().storage->data(), impl().storage->data(), numel() * dtype_size(dtype()));
  return record("clone", out, {*this}, where)
      .formula([](const Tensor& dY) -> Grads { return {dY}; })
      .jvp([](const Tangents& t) { return t[0]; });
}

// to: Y = X converted;  dX = dY converted back;  tY = tX converted (an int64 result is not
// differentiable)
Tensor Tensor::to(Dtype d, const std::source_location& where) const {
  Tensor out(shape(), d);
  dispatch_any(dtype(), [&]<class S>() {
    dispatch_any(d, [&]<class D>() {
      const S* src = data<S>();
      D* dst = out.data<D>();
      for (int64_t i = 0; i < numel(); ++i) {
        if constexpr (std::is_same_v<D, int64_t> && std::is_floating_point_v<S>)
          // A NaN, an infinity or a value past int64 has no int64 (the cast would be undefined).
          if (!(src[i] >= S(-9223372036854775808.0) && src[i] < S(9223372036854775808.0)))
            throw ValueError("to: element " + shape().index_str(i) + " of a " +
                             dtype_name(dtype()) + " tensor " + shape().str() + " is " +
                             std::to_string(src[i]) + ", which no int64 holds");
        dst[i] = static_cast<D>(src[i]);
      }
    });
  });
  if (!is_floating(d)) return out;
  const Dtype from = dtype();
  return record("to", out, {*this}, where)
      .formula([from](const Tensor& dY) -> Grads { return {dY.to(from)}; })
      .jvp([&](const Tangents& t) { return t[0].to(d); });
}

Tensor full(const Shape& shape, double value, Dtype dtype) {
  Tensor t(shape, dtype);
  const int64_t n = shape.numel();
  dispatch_any(dtype, [&]<class T>() {
    T* p = t.data<T>();
    // +0.0 is all-zero bytes in every element type (-0.0 is not): memset, the fastest fill.
    if (value == 0.0 && !std::signbit(value))
      std::memset(p, 0, static_cast<std::size_t>(n) * sizeof(T));
    else
      std::fill(p, p + n, static_cast<T>(value));
  });
  return t;
}

Tensor zeros(const Shape& shape, Dtype dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }
Tensor scalar(double value, Dtype dtype) { return full(Shape{}, value, dtype); }
Tensor zeros_like(const Tensor& x) { return full(x.shape(), 0.0, x.dtype()); }
Tensor ones_like(const Tensor& x) { return full(x.shape(), 1.0, x.dtype()); }

Tensor from_indices(const std::vector<int64_t>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError("from_indices: " + std::to_string(values.size()) +
                     " values do not fill shape " + shape.str());
  Tensor t(shape, Dtype::i64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

Tensor from_bools(const std::vector<bool>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError("from_bools: " + std::to_string(values.size()) +
                     " values do not fill shape " + shape.str());
  Tensor t(shape, Dtype::b8);
  std::copy(values.begin(), values.end(), t.data<bool>());
  return t;
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, Dtype dtype) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values do not fill shape " + shape.str());
  Tensor t(shape, dtype);
  dispatch(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Tensor randn(const Shape& shape, Rng& rng, Dtype dtype, double stddev) {
  std::vector<double> v(shape.numel());
  for (double& x : v) x = stddev * rng.normal();
  return from_vector(v, shape, dtype);
}

Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi, Dtype dtype) {
  std::vector<double> v(shape.numel());
  for (double& x : v) x = rng.uniform(lo, hi);
  return from_vector(v, shape, dtype);
}

}  // namespace tg
