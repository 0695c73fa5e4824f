// narrow: Y = X[..., s:s+n, ...] along one axis;  dX = cat(zeros before, dY, zeros after)
//   tY = narrow(tX, axis, s, n)
// cat:    Y = [X_0, X_1, ...] along one axis;    dX_i = narrow(dY, axis, offset_i, n_i)
//   tY = cat(tX_0, tX_1, ...) (zeros of X_i's shape for an input without a tangent)
// split:  narrows of `size` along the axis (the last one shorter).
// Each derivative is written with the other op, so both are twice differentiable. A node holds
// at most kMaxInputs inputs: cat of more tensors records a tree of cats of at most that many.

#include <tapegrad/ops/narrow.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

// A tensor seen along one axis as (outer, n, inner), row-major.
struct AxisView {
  int64_t outer = 1, n = 0, inner = 1;
};

AxisView view_along(const Shape& s, int axis) {
  AxisView v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  v.n = s[axis];
  for (int i = axis + 1; i < s.rank(); ++i) v.inner *= s[i];
  return v;
}

// Copies `len` positions along the axis (of any dtype, int64 indices and bool masks included:
// narrow and cat only move elements), from `src` at `src_at` into `dst` at `dst_at`.
void copy_along(const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at, int64_t len,
                int axis) {
  const AxisView s = view_along(src.shape(), axis), d = view_along(dst.shape(), axis);
  if (len == 0 || s.outer == 0 || s.inner == 0) return;
  dispatch_any(src.dtype(), [&]<class T>() {
    const T* ps = src.data<T>();
    T* pd = dst.data<T>();
    const int64_t block = len * s.inner;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(pd + (o * d.n + dst_at) * d.inner, ps + (o * s.n + src_at) * s.inner,
                  static_cast<std::size_t>(block) * sizeof(T));
  });
}

// Zeros `len` positions along the axis of `dst` from `at` on.
void zero_along(Tensor& dst, int64_t at, int64_t len, int axis) {
  const AxisView d = view_along(dst.shape(), axis);
  if (len == 0 || d.outer == 0 || d.inner == 0) return;
  dispatch_any(dst.dtype(), [&]<class T>() {
    T* p = dst.data<T>();
    for (int64_t o = 0; o < d.outer; ++o)
      std::fill_n(p + (o * d.n + at) * d.inner, len * d.inner, T(0));
  });
}

Shape with_axis(const Shape& s, int axis, int64_t n) {
  Shape out = s;
  out[axis] = n;
  return out;
}

std::string shapes_str(const std::vector<Tensor>& xs) {
  std::string s;
  for (std::size_t i = 0; i < xs.size(); ++i)
    s += (i ? ", " : "") + xs[i].shape().str() + " " + dtype_name(xs[i].dtype());
  return s;
}

// The checks of cat; returns the normalised axis.
int check_cat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw ShapeError("cat: needs at least one tensor");
  for (std::size_t i = 0; i < xs.size(); ++i)
    detail::check_defined("cat", xs[i], ("tensor " + std::to_string(i)).c_str());
  const Tensor& x0 = xs[0];
  const int ax = normalize_axis(axis, x0.shape(), "cat");
  for (const Tensor& x : xs) {
    if (x.dtype() != x0.dtype()) throw ValueError("cat: dtypes differ: " + shapes_str(xs));
    bool fits = x.rank() == x0.rank();
    for (int i = 0; fits && i < x0.rank(); ++i) fits = i == ax || x.shape()[i] == x0.shape()[i];
    if (!fits)
      throw ShapeError("cat: shapes differ outside axis " + std::to_string(ax) + ": " +
                       shapes_str(xs));
  }
  return ax;
}

// The joined tensor, off the tape.
Tensor cat_values(const std::vector<Tensor>& xs, int ax) {
  int64_t total = 0;
  for (const Tensor& x : xs) total += x.size(ax);
  Tensor Y(with_axis(xs[0].shape(), ax, total), xs[0].dtype());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    copy_along(x, 0, Y, at, x.size(ax), ax);
    at += x.size(ax);
  }
  return Y;
}

// cat of at most kMaxInputs tensors, recorded as one node.
Tensor cat_node(const std::vector<Tensor>& xs, int ax, const std::source_location& where) {
  Tensor Y = cat_values(xs, ax);
  std::array<int64_t, kMaxInputs> sizes{};
  for (std::size_t i = 0; i < xs.size(); ++i) sizes[i] = xs[i].size(ax);
  const int count = static_cast<int>(xs.size());
  return record("cat", std::move(Y), xs, where).formula([sizes, count, ax](const Tensor& dY) -> Grads {
    Grads g;
    int64_t at = 0;
    for (int i = 0; i < count; ++i) {
      g[i] = narrow(dY, ax, at, sizes[i]);
      at += sizes[i];
    }
    return g;
  }).jvp([&](const Tangents& t, const Tensor& Y) {
    std::vector<Tensor> ts(count);
    for (int i = 0; i < count; ++i)
      ts[i] = t[i].defined() ? t[i] : zeros(with_axis(Y.shape(), ax, sizes[i]), Y.dtype());
    return cat(ts, ax);
  });
}

}  // namespace

Tensor narrow(const Tensor& X, int axis, int64_t start, int64_t length,
              const std::source_location& where) {
  detail::check_defined("narrow", X, "input");
  const int ax = normalize_axis(axis, X.shape(), "narrow");
  const int64_t n = X.size(ax);
  if (start < 0 || length < 0 || start > n || length > n - start)
    throw ShapeError("narrow: range [" + std::to_string(start) + ", " + std::to_string(start) +
                     " + " + std::to_string(length) + ") is outside axis " + std::to_string(ax) +
                     " of shape " + X.shape().str());
  Tensor Y(with_axis(X.shape(), ax, length), X.dtype());
  copy_along(X, start, Y, 0, length, ax);
  const Shape sX = X.shape();
  return record("narrow", std::move(Y), {X}, where)
      .formula([sX, ax, start, length](const Tensor& dY) -> Grads {
        const Tensor before = zeros(with_axis(sX, ax, start), dY.dtype());
        const Tensor after = zeros(with_axis(sX, ax, sX[ax] - start - length), dY.dtype());
        return {cat({before, dY, after}, ax)};
      })
      .jvp([&](const Tangents& t) { return narrow(t[0], ax, start, length); })
      .kernel([sX, ax, start, length](const Tensor& dY) -> Grads {  // one pass over dX
        Tensor dX(sX, dY.dtype());
        zero_along(dX, 0, start, ax);
        copy_along(dY, 0, dX, start, length, ax);
        zero_along(dX, start + length, sX[ax] - start - length, ax);
        return {dX};
      });
}

std::vector<Tensor> split(const Tensor& X, int64_t size, int axis,
                          const std::source_location& where) {
  detail::check_defined("split", X, "input");
  const int ax = normalize_axis(axis, X.shape(), "split");
  if (size < 1)
    throw ValueError("split: size must be at least 1, got " + std::to_string(size) +
                     " for shape " + X.shape().str());
  const int64_t n = X.size(ax);
  if (n == 0) return {narrow(X, ax, 0, 0, where)};  // as torch.split: one empty piece
  std::vector<Tensor> pieces;
  for (int64_t at = 0; at < n; at += size)
    pieces.push_back(narrow(X, ax, at, std::min(size, n - at), where));
  return pieces;
}

Tensor cat(const std::vector<Tensor>& xs, int axis, const std::source_location& where) {
  const int ax = check_cat(xs, axis);
  if (xs.size() <= static_cast<std::size_t>(kMaxInputs)) return cat_node(xs, ax, where);
  bool recording = false;
  if (is_grad_enabled())
    for (const Tensor& x : xs) recording = recording || x.requires_grad();
  if (detail::forward_level() != 0)  // a tangent goes through the nodes' rules
    for (const Tensor& x : xs) recording = recording || detail::tangent_of(x).defined();
  if (!recording) {
    if (detail::ReadCollector::active()) detail::ReadCollector::note(xs);  // checkpoint's forward
    return cat_values(xs, ax);
  }
  // Groups of kMaxInputs, joined level by level.
  std::vector<Tensor> level = xs;
  while (level.size() > 1) {
    std::vector<Tensor> next;
    for (std::size_t i = 0; i < level.size(); i += kMaxInputs) {
      const std::size_t end = std::min(level.size(), i + kMaxInputs);
      std::vector<Tensor> group(level.begin() + i, level.begin() + end);
      next.push_back(group.size() == 1 ? group[0] : cat_node(group, ax, where));
    }
    level = std::move(next);
  }
  return level[0];
}

}  // namespace tg
