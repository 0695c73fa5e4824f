// softmax: Y = exp(X - max) / sum(exp(X - max)) along dim;  dX = Y * (dY - sum(dY * Y, dim));
//   tY = Y * (tX - sum(tX * Y, dim))
// A fully masked slice (max = -inf) is defined as all zeros; then Y = 0 makes dX = 0 as well.

#include <tapegrad/ops/softmax.h>

#include <cmath>
#include <limits>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/axis_columns.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

// One contiguous slice x -> y (y may be x).
template <class T>
void softmax_slice(const T* px, T* py, int64_t n) {
  const auto x = detail::CMapArr<T>(px, n);
  auto y = detail::MapArr<T>(py, n);
  const T mx = x.template maxCoeff<Eigen::PropagateNaN>();
  if (std::isnan(mx)) {  // NaN in, NaN out: the whole slice, as IEEE arithmetic would have it
    y.setConstant(std::numeric_limits<T>::quiet_NaN());
    return;
  }
  if (mx == -std::numeric_limits<T>::infinity()) {
    y.setZero();
    return;
  }
  // exp_into gives masked (-inf) entries exactly 0, and is vectorised (an Eigen select around
  // the exp went entry by entry through glibc's exp: 5 times PyTorch's time).
  y = x - mx;
  detail::exp_into(py, py, n);
  y /= detail::row_sum(py, n);  // (the same order wherever the row starts)
}

// dX = Y (dY - sum(dY Y)) along the reduction's axis.
template <class T>
void softmax_grad(const T* dy, const T* y, T* dx, const detail::AxisReduction& r) {
  const int64_t n = r.n;
  if (r.inner == 1) {  // rows: their dot products in row_sum's order, wherever a row starts
    detail::for_parts(
        r.outer,
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            const int64_t at = o * n;
            const T dot = detail::row_dot(dy + at, y + at, n);
            detail::MapArr<T>(dx + at, n) =
                detail::CMapArr<T>(y + at, n) * (detail::CMapArr<T>(dy + at, n) - dot);
          }
        },
        detail::pass_serial_below(n));
    return;
  }
  if (r.inner < detail::kMinColumns) {  // a narrow slab: a slice at a time, as a row
    detail::for_slices<T>(r, 2, [&](int64_t start, T* rows) {
      detail::gather(dy + start, n, r.inner, rows);
      detail::gather(y + start, n, r.inner, rows + n);
      const T dot = detail::row_dot(rows, rows + n, n);
      auto g = detail::MapArr<T>(rows, n);
      g = detail::CMapArr<T>(rows + n, n) * (g - dot);
      detail::scatter(rows, n, r.inner, dx + start);
    });
    return;
  }
  detail::for_column_blocks<T>(r, [&](int64_t o, int64_t c, int64_t w) {
    const int64_t start = o * n * r.inner + c;
    alignas(64) T dots[detail::kMaxColumnBlock];
    auto dot = detail::MapArr<T>(dots, w);
    dot.setZero();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = start + k * r.inner;
      dot += detail::CMapArr<T>(dy + at, w) * detail::CMapArr<T>(y + at, w);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = start + k * r.inner;
      detail::MapArr<T>(dx + at, w) =
          detail::CMapArr<T>(y + at, w) * (detail::CMapArr<T>(dy + at, w) - dot);
    }
  });
}

}  // namespace

Tensor softmax(const Tensor& X, int dim, const std::source_location& where) {
  detail::check_floating("softmax", X);
  detail::check_min_rank("softmax", X, 1);
  const detail::AxisReduction r = detail::axis_reduction(X.shape(), dim, true, "softmax");
  Tensor Y(X.shape(), X.dtype());
  const int64_t n = r.n;
  dispatch(X.dtype(), [&]<class T>() {
    if (X.numel() == 0) return;
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    if (r.inner == 1) {  // the last axis (or only size-1 axes after it): contiguous slices
      detail::for_parts(
          r.outer,
          [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) softmax_slice<T>(x + o * n, y + o * n, n);
          },
          detail::pass_serial_below(n));
      return;
    }
    if (r.inner < detail::kMinColumns) {  // a narrow slab: a slice at a time, as a row
      detail::for_slices<T>(r, 1, [&](int64_t start, T* row) {
        detail::gather(x + start, n, r.inner, row);
        softmax_slice<T>(row, row, n);
        detail::scatter(row, n, r.inner, y + start);
      });
      return;
    }
    // Another axis: the slabs' columns a block at a time (ops/axis_columns.h).
    detail::for_column_blocks<T>(r, [&](int64_t o, int64_t c, int64_t w) {
      const int64_t start = o * n * r.inner + c;
      alignas(64) T m[detail::kMaxColumnBlock], s[detail::kMaxColumnBlock];
      detail::column_max(x + start, n, r.inner, w, m);
      for (int64_t j = 0; j < w; ++j)  // a fully masked column: shifted by 0, its exps all 0
        if (m[j] == -std::numeric_limits<T>::infinity()) m[j] = 0;
      detail::column_exp_sums(x + start, n, r.inner, w, m, y + start, r.inner, s);
      // Only a fully masked column sums to 0 (elsewhere the max's exp is 1): 0 / inf = 0 there.
      for (int64_t j = 0; j < w; ++j)
        if (s[j] == 0) s[j] = std::numeric_limits<T>::infinity();
      const auto sums = detail::CMapArr<T>(s, w);
      for (int64_t k = 0; k < n; ++k) detail::MapArr<T>(y + start + k * r.inner, w) /= sums;
    });
  });
  return record("softmax", std::move(Y), {X}, where)
      .formula([dim](const Tensor& dY, const Tensor& Y) -> Grads {
        return {mul(Y, sub(dY, sum(mul(dY, Y), dim, true)))};
      })
      .kernel([r](const Tensor& dY, const Tensor& Y) -> Grads {  // one pass to read, one to write
        Tensor dX(Y.shape(), Y.dtype());
        dispatch(Y.dtype(), [&]<class T>() {
          if (Y.numel() == 0) return;
          softmax_grad<T>(dY.data<T>(), Y.data<T>(), dX.data<T>(), r);
        });
        return {dX};
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return mul(Y, sub(t[0], sum(mul(t[0], Y), dim, true)));
      });
}

}  // namespace tg
