// log_softmax: Y = X - max - log(sum(exp(X - max))) along dim;  dX = dY - exp(Y) sum(dY, dim);
//   tY = tX - sum(exp(Y) tX, dim)
// A fully masked slice (max = -inf) is defined as all -inf with zero gradient: there exp(Y) = 0
// would pass dY (and tX) straight through, so such slices are zeroed by a constant keep mask.

#include <tapegrad/ops/log_softmax.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/axis_columns.h>
#include <tapegrad/ops/exp.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

using Stride = Eigen::InnerStride<Eigen::Dynamic>;
template <class T>
using Slice = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, 0, Stride>;
template <class T>
using CSlice = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, 0, Stride>;

// Calls f(o, start) for every slice along the reduction's axis: the slice holds r.n entries
// from `start`, r.inner apart (1 apart for the last axis, where the maps are contiguous).
template <class F>
void for_each_slice(const detail::AxisReduction& r, F&& f) {
  if (r.n == 0) return;
  for (int64_t o = 0; o < r.outer; ++o)
    for (int64_t i = 0; i < r.inner; ++i) f(o * r.inner + i, o * r.n * r.inner + i);
}

// The slices' keep mask (the input's shape with dim kept as 1): 0 for the fully masked slices,
// 1 for the others; undefined when no slice is masked.
Tensor live_slices(const Tensor& Y, const detail::AxisReduction& r) {
  return dispatch(Y.dtype(), [&]<class T>() {
    Tensor keep(r.kept, Y.dtype());
    T* k = keep.data<T>();
    bool any_dead = false;
    for_each_slice(r, [&](int64_t at, int64_t start) {
      const CSlice<T> y(Y.data<T>() + start, r.n, Stride(r.inner));
      k[at] = (y == -std::numeric_limits<T>::infinity()).all() ? T(0) : T(1);
      any_dead = any_dead || k[at] == T(0);
    });
    return any_dead ? keep : Tensor();
  });
}

// A slice's sum in the same order wherever it starts: by detail::row_sum when it is contiguous
// (a row of the last axis), else Eigen's (one entry after another, a narrow slab's slice).
template <class A>
auto slice_sum(const A& a) {
  if constexpr (A::InnerStrideAtCompileTime == 1)
    return detail::row_sum(a.data(), a.size());
  else
    return a.sum();
}

// A slice's scratch (r.n entries).
template <class T>
using ArrayOf = Eigen::Array<T, Eigen::Dynamic, 1>;

// One slice: a row of the last axis, or a narrow slab's strided slice. Its exps go through
// `scratch` (contiguous): detail::exp_into is vectorised and makes exp(-inf) exactly 0, so
// masked entries add nothing to the sum. (An Eigen select around the exp went entry by entry
// through glibc's exp: 5 times PyTorch's time.) Its sums by detail::row_sum, or slice_sum: the
// same order wherever the slice starts.
template <class T, class In, class Out>
void log_softmax_slice(const In& x, Out&& y, T* scratch) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
  if (mx == ninf) {
    y.setConstant(ninf);
    return;
  }
  auto e = detail::MapArr<T>(scratch, x.size());
  e = x - mx;
  detail::exp_into(scratch, scratch, x.size());
  const T lse = std::log(detail::row_sum(scratch, x.size()));
  y = (x - mx) - lse;  // -inf stays -inf; NaN or +inf in the slice give NaN, as in PyTorch
}

template <class T, class In, class Out>
void log_softmax_grad_slice(const In& y, const In& dy, Out&& dx, T* scratch) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if ((y == ninf).all()) {
    dx.setZero();
    return;
  }
  auto e = detail::MapArr<T>(scratch, y.size());
  e = y;
  detail::exp_into(scratch, scratch, y.size());
  dx = dy - e * slice_sum(dy);
}

// Y = log_softmax(X) along the reduction's axis: rows of the last axis, a narrow slab's slices,
// or another axis's column blocks (y holding the exps until the last pass).
template <class T>
void log_softmax_forward(const T* x, T* y, const detail::AxisReduction& r) {
  const int64_t n = r.n;
  if (r.inner == 1) {  // the last axis: contiguous slices, the fast path, rows on the team
    detail::for_parts(
        r.outer,
        [&](int64_t begin, int64_t end) {
          ArrayOf<T> scratch(n);
          for (int64_t o = begin; o < end; ++o)
            log_softmax_slice<T>(detail::CMapArr<T>(x + o * n, n), detail::MapArr<T>(y + o * n, n),
                                 scratch.data());
        },
        detail::pass_serial_below(n));
    return;
  }
  if (r.inner < detail::kMinColumns) {  // a narrow slab: a slice at a time
    detail::for_slices<T>(r, 1, [&](int64_t start, T* scratch) {
      log_softmax_slice<T>(CSlice<T>(x + start, n, Stride(r.inner)),
                           Slice<T>(y + start, n, Stride(r.inner)), scratch);
    });
    return;
  }
  detail::for_column_blocks<T>(r, [&](int64_t o, int64_t c, int64_t w) {
    const int64_t start = o * n * r.inner + c;
    alignas(64) T m[detail::kMaxColumnBlock], sums[detail::kMaxColumnBlock],
        lse[detail::kMaxColumnBlock];
    detail::column_max(x + start, n, r.inner, w, m);
    for (int64_t j = 0; j < w; ++j)  // a fully masked column: shifted by 0, its exps all 0
      if (m[j] == -std::numeric_limits<T>::infinity()) m[j] = 0;
    detail::column_exp_sums(x + start, n, r.inner, w, m, y + start, r.inner, sums);
    detail::MapArr<T>(lse, w) = detail::MapArr<T>(sums, w).log();  // (vectorised)
    for (int64_t j = 0; j < w; ++j)  // only a fully masked column sums to 0: it stays -inf
      lse[j] = detail::pick(sums[j] == T(0), T(0), lse[j]);
    const auto shift = detail::CMapArr<T>(m, w), sub = detail::CMapArr<T>(lse, w);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = start + k * r.inner;
      detail::MapArr<T>(y + at, w) = (detail::CMapArr<T>(x + at, w) - shift) - sub;
    }
  });
}

// dX = dY - exp(Y) sum(dY) along the reduction's axis, 0 in fully masked slices: rows, a narrow
// slab's slices, or column blocks (dx holding exp(Y) until the last pass).
template <class T>
void log_softmax_grad(const T* dy, const T* y, T* dx, const detail::AxisReduction& r) {
  const int64_t n = r.n;
  if (r.inner == 1) {
    detail::for_parts(
        r.outer,
        [&](int64_t begin, int64_t end) {
          ArrayOf<T> scratch(n);
          for (int64_t o = begin; o < end; ++o) {
            const int64_t at = o * n;
            log_softmax_grad_slice<T>(detail::CMapArr<T>(y + at, n), detail::CMapArr<T>(dy + at, n),
                                      detail::MapArr<T>(dx + at, n), scratch.data());
          }
        },
        detail::pass_serial_below(n));
    return;
  }
  if (r.inner < detail::kMinColumns) {  // a narrow slab: a slice at a time
    const Stride stride(r.inner);
    detail::for_slices<T>(r, 1, [&](int64_t start, T* scratch) {
      log_softmax_grad_slice<T>(CSlice<T>(y + start, n, stride), CSlice<T>(dy + start, n, stride),
                                Slice<T>(dx + start, n, stride), scratch);
    });
    return;
  }
  detail::for_column_blocks<T>(r, [&](int64_t o, int64_t c, int64_t w) {
    const int64_t start = o * n * r.inner + c;
    const T* yb = y + start;
    const T* dyb = dy + start;
    T* dxb = dx + start;
    alignas(64) T zero[detail::kMaxColumnBlock], dy_sum[detail::kMaxColumnBlock],
        exp_sum[detail::kMaxColumnBlock];
    std::fill_n(zero, w, T(0));
    auto sums = detail::MapArr<T>(dy_sum, w);
    sums.setZero();
    for (int64_t k = 0; k < n; ++k) sums += detail::CMapArr<T>(dyb + k * r.inner, w);
    detail::column_exp_sums(yb, n, r.inner, w, zero, dxb, r.inner, exp_sum);
    bool dead = false;  // a fully masked column (all of Y -inf) sums its exps to 0
    for (int64_t j = 0; j < w; ++j) dead = dead || exp_sum[j] == 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = k * r.inner;
      auto g = detail::MapArr<T>(dxb + at, w);
      g = detail::CMapArr<T>(dyb + at, w) - g * sums;
      if (dead)  // its gradient is zero
        for (int64_t j = 0; j < w; ++j)
          if (exp_sum[j] == 0) g[j] = 0;
    }
  });
}

}  // namespace

Tensor log_softmax(const Tensor& X, int dim, const std::source_location& where) {
  detail::check_floating("log_softmax", X);
  detail::check_min_rank("log_softmax", X, 1);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), dim, true, "log_softmax");
  Tensor Y(X.shape(), X.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    if (X.numel() > 0) log_softmax_forward<T>(X.data<T>(), Y.data<T>(), r);
  });
  return record("log_softmax", std::move(Y), {X}, where)
      .formula([dim, r](const Tensor& dY, const Tensor& Y) -> Grads {
        const Tensor dX = sub(dY, mul(exp(Y), sum(dY, dim, true)));
        const Tensor keep = live_slices(Y, r);
        return {keep.defined() ? mul(dX, keep) : dX};
      })
      .kernel([r](const Tensor& dY, const Tensor& Y) -> Grads {
        Tensor dX(Y.shape(), Y.dtype());
        dispatch(Y.dtype(), [&]<class T>() {
          if (Y.numel() > 0) log_softmax_grad<T>(dY.data<T>(), Y.data<T>(), dX.data<T>(), r);
        });
        return {dX};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        const Tensor tY = sub(t[0], sum(mul(exp(Y), t[0]), dim, true));
        const Tensor keep = live_slices(Y, r);
        return keep.defined() ? mul(tY, keep) : tY;
      });
}

}  // namespace tg
