// The default dtype and the factories torch users reach for first: arange, linspace, eye, rand,
// randint. Each checks its arguments as PyTorch does, with a tg:: error naming the factory.

#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg {

namespace {

// Process-wide, as torch.set_default_dtype: a thread-local default would leave the worker
// threads of a program that set it at start on float32.
std::atomic<Dtype> g_default_dtype{Dtype::f32};

std::string num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// v[i] = value(i) for i < n, converted to the dtype.
template <class Value>
Tensor fill_1d(int64_t n, Dtype dtype, Value value) {
  Tensor t(Shape{n}, dtype);
  dispatch_any(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value(i));
  });
  return t;
}

}  // namespace

Dtype get_default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(Dtype dtype) {
  if (!is_floating(dtype))
    throw ValueError(
        std::string("set_default_dtype: the default must be float32 or float64, got ") +
        dtype_name(dtype));
  g_default_dtype.store(dtype, std::memory_order_relaxed);
}

// arange: n = ceil((end - start) / step) in double, as PyTorch's RangeFactories; x_i = start +
// i * step, computed in double and converted.
Tensor arange(double start, double end, double step, Dtype dtype) {
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw ValueError("arange: start = " + num(start) + ", end = " + num(end) +
                     " and step = " + num(step) + " must be finite");
  if (step == 0) throw ValueError("arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    throw ValueError("arange: end = " + num(end) +
                     " is on the wrong side of start = " + num(start) + " for step = " + num(step));
  const double n = std::ceil((end - start) / step);
  if (!(n < static_cast<double>(std::numeric_limits<int64_t>::max())))
    throw ValueError("arange: " + num(n) + " elements do not fit in int64");
  return fill_1d(static_cast<int64_t>(n), dtype,
                 [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor arange(double end, Dtype dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor detail::arange_i64(int64_t start, int64_t end, int64_t step) {
  if (step == 0) throw ValueError("arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    throw ValueError("arange: end = " + std::to_string(end) + " is on the wrong side of start = " +
                     std::to_string(start) + " for step = " + std::to_string(step));
  // ceil((end - start) / step) exactly, in unsigned arithmetic (end - start may pass int64)
  const uint64_t span = step > 0 ? static_cast<uint64_t>(end) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(end);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const auto n = static_cast<int64_t>(span / stride + (span % stride != 0));
  Tensor t(Shape{n}, Dtype::i64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + i * step;
  return t;
}

// linspace as PyTorch's CPU kernel: step = (end - start) / (steps - 1) in the dtype (double for
// int64), the first half counted up from start and the second down from end, so both ends are
// exact.
Tensor linspace(double start, double end, int64_t steps, Dtype dtype) {
  if (steps < 0) throw ValueError("linspace: steps must be >= 0, got " + std::to_string(steps));
  Tensor t(Shape{steps}, dtype);
  auto fill = [&]<class S, class T>(T* p) {
    const S a = static_cast<S>(start), b = static_cast<S>(end);
    if (steps == 1) {
      p[0] = static_cast<T>(a);
      return;
    }
    const S step = (b - a) / static_cast<S>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = static_cast<T>(i < halfway ? a + step * static_cast<S>(i)
                                        : b - step * static_cast<S>(steps - i - 1));
  };
  if (dtype == Dtype::i64)
    fill.template operator()<double>(t.data<int64_t>());
  else
    dispatch(dtype, [&]<class T>() { fill.template operator()<T>(t.data<T>()); });
  return t;
}

Tensor eye(int64_t n, Dtype dtype) { return eye(n, n, dtype); }

Tensor eye(int64_t n, int64_t m, Dtype dtype) {
  if (n < 0 || m < 0)
    throw ValueError("eye: n = " + std::to_string(n) + " and m = " + std::to_string(m) +
                     " must be >= 0");
  Tensor t = zeros({n, m}, dtype);
  for (int64_t i = 0; i < std::min(n, m); ++i) t.set({i, i}, 1.0);
  return t;
}

Tensor rand(const Shape& shape, Rng& rng, Dtype dtype) {
  return uniform(shape, rng, 0.0, 1.0, dtype);
}

// A uniform integer in [0, n) by rejection (no modulo bias, the same on every platform): a draw
// r is kept when below the largest multiple of n that fits in 2^64.
Tensor randint(int64_t low, int64_t high, const Shape& shape, Rng& rng, Dtype dtype) {
  if (low >= high)
    throw ValueError("randint: low = " + std::to_string(low) +
                     " must be below high = " + std::to_string(high));
  const uint64_t n = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
  Tensor t(shape, dtype);
  dispatch_any(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < shape.numel(); ++i) {
      uint64_t r = rng.engine()();
      while (r >= limit) r = rng.engine()();
      p[i] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + r % n));
    }
  });
  return t;
}

}  // namespace tg
