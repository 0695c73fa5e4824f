// layer_norm over the last axis (C): mu = mean(X), var = mean((X - mu)^2), r = 1 / sqrt(var + eps),
//   Xhat = (X - mu) r,  Y = Xhat W + B;
//   g = dY W:  dX = r (g - mean(g) - Xhat mean(g Xhat)),  dW = sum_rows(dY Xhat),  dB =
//   sum_rows(dY);
//   tY = tXhat W + Xhat tW + tB,  tXhat = r (tX - mean(tX) - Xhat mean(tX Xhat))
//   (Xhat's Jacobian is symmetric: tXhat is dX's map applied to tX)
// The forward and the kernel run row by row in the input's dtype, their sums folded into double
// (a row's by lanes, dW's and dB's over blocks of rows), the statistics (mean, r) in double; the
// tangent kernel runs in double; the formula and the tangent rule recompute Xhat with ops.

#include <tapegrad/ops/layer_norm.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <omp.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/add.h>
#include <tapegrad/ops/mean.h>
#include <tapegrad/ops/mul.h>
#include <tapegrad/ops/norm_formula.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/sqrt.h>
#include <tapegrad/ops/sub.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

using ArrD = Eigen::Array<double, Eigen::Dynamic, 1>;

void check_affine(const Tensor& X, const Tensor& p, const char* name) {
  if (!p.defined()) return;
  if (p.dtype() != X.dtype())
    throw ValueError(std::string("layer_norm: ") + name + " " + p.shape().str() + " " +
                     dtype_name(p.dtype()) + " and input " + X.shape().str() + " " +
                     dtype_name(X.dtype()) + ": dtypes differ");
  if (!(p.shape() == Shape{X.size(-1)}))
    throw ShapeError(std::string("layer_norm: ") + name + " " + p.shape().str() +
                     " must be (C,) = (" + std::to_string(X.size(-1)) + ",) for input " +
                     X.shape().str());
}

// The formula, in ops.
Grads layer_norm_formula(const Tensor& X, const Tensor& W, const Tensor& B, double eps,
                         const Tensor& dY) {
  const Tensor mu = mean(X, -1, true);                                               // (..., 1)
  const Tensor Xc = sub(X, mu);                                                      // (..., C)
  const Tensor r = rsqrt(add(mean(mul(Xc, Xc), -1, true), scalar(eps, X.dtype())));  // (..., 1)
  const Tensor Xhat = mul(Xc, r);                                                    // (..., C)
  const Tensor g = W.defined() ? mul(dY, W) : dY;                                    // (..., C)
  Tensor dX, dW, dB;
  if (X.requires_grad())
    dX = mul(r, sub(sub(g, mean(g, -1, true)), mul(Xhat, mean(mul(g, Xhat), -1, true))));
  if (W.defined() && W.requires_grad()) dW = sum_to(mul(dY, Xhat), W.shape());
  if (B.defined() && B.requires_grad()) dB = sum_to(dY, B.shape());
  return {dX, dW, dB};
}

// The tangent rule, in ops.
Tensor layer_norm_jvp(const Tensor& X, const Tensor& W, double eps, const Tangents& t) {
  const detail::Normalized n = detail::normalize_over(X, {-1}, eps);
  const Tensor from_x = detail::tangent_term(t[0], [&](const Tensor& tX) {
    const Tensor tXhat = detail::normalize_over_backward(n, tX, {-1});  // (..., C)
    return W.defined() ? mul(tXhat, W) : tXhat;
  });
  const Tensor from_w =
      detail::tangent_term(t[1], [&](const Tensor& tW) { return mul(n.Xhat, tW); });
  return detail::tangent_sum(detail::tangent_sum(from_x, from_w, X.shape()), t[2], X.shape());
}

// One row's tXhat W = r (tX - mean(tX) - Xhat mean(tX Xhat)) W, as an expression (nothing
// allocated); the arrays must outlive its use.
auto row_tangent(const ArrD& w, double rstd, const ArrD& xhat, const ArrD& tx) {
  return w * rstd * (tx - tx.mean() - xhat * (tx * xhat).mean());
}

// The same tangent, row by row, from the forward's statistics (for a rule nothing will
// differentiate: detail::tangent_records).
template <class T>
Tensor layer_norm_jvp_kernel(const Tensor& X, const Tensor& W, const Tensor& stats,
                             const Tangents& t) {
  const int64_t C = X.size(-1), rows = C ? X.numel() / C : 0;
  auto param = [C](const Tensor& p, double fill) {
    return p.defined() ? ArrD(detail::CMapArr<T>(p.data<T>(), C).template cast<double>())
                       : ArrD::Constant(C, fill);
  };
  const ArrD w = param(W, 1), tw = param(t[1], 0), tb = param(t[2], 0);
  Tensor tY(X.shape(), X.dtype());
  const double* st = stats.data<double>();
  ArrD xhat(C), ty(C), tx(C);
  for (int64_t r = 0; r < rows; ++r) {
    const double rstd = st[2 * r + 1];
    xhat = (detail::CMapArr<T>(X.data<T>() + r * C, C).template cast<double>() - st[2 * r]) * rstd;
    ty = xhat * tw + tb;
    if (t[0].defined()) {
      tx = detail::CMapArr<T>(t[0].data<T>() + r * C, C).template cast<double>();
      ty += row_tangent(w, rstd, xhat, tx);
    }
    detail::MapArr<T>(tY.data<T>() + r * C, C) = ty.template cast<T>();
  }
  return tY;
}

// Rooms for the threads a pass may run on: a team is at most num_threads() (ops/threads.h).
int64_t rows_rooms() { return std::max(1, num_threads()); }

// A row's sums run in T (as PyTorch's float layer_norm) by kLanes partial sums (entry i in lane
// i % kLanes), folded into double every kFold entries (so a wide row's sums keep their digits)
// and added at the end: a fixed order, so the same bits on any thread count, kept in vector
// registers. (A row's sums in double took half of a float32 layer_norm's time.)
constexpr int64_t kLanes = 16;
constexpr int64_t kFold = 1024;
template <class T>
using Lanes = Eigen::Array<T, kLanes, 1>;

// kLanes entries from p.
template <class T>
auto lanes_at(const T* p) {
  return Eigen::Map<const Lanes<T>>(p);
}

// Two sums over a row of C entries, as above: block(i, f, g) adds kLanes entries from i (a
// multiple of kLanes) into the lanes f and g, one(i, f, g) entry i into the doubles f and g.
template <class T, class Block, class One>
std::pair<double, double> row_sums(int64_t C, const Block& block, const One& one) {
  const int64_t full = C - C % kLanes;
  Lanes<double> f_total = Lanes<double>::Zero(), g_total = Lanes<double>::Zero();
  for (int64_t i0 = 0; i0 < full; i0 += kFold) {
    Lanes<T> f = Lanes<T>::Zero(), g = Lanes<T>::Zero();
    for (int64_t i = i0; i < std::min(full, i0 + kFold); i += kLanes) block(i, f, g);
    f_total += f.template cast<double>();
    g_total += g.template cast<double>();
  }
  double f = f_total.sum(), g = g_total.sum();
  for (int64_t i = full; i < C; ++i) one(i, f, g);
  return {f, g};
}

// A row's mean in T as hi + lo: hi the mean rounded to T, lo what is left. x - hi is exact for
// the entries near the mean, so ((x - hi) - lo) keeps the row's spread to T's precision whatever
// its offset (rows at 1e4 with unit spread, or one outlier entry). The forward and the backward
// take it from the same mean in double (the statistics), so their Xhat agree.
template <class T>
struct Centre {
  T hi, lo;
  explicit Centre(double mean) : hi(T(mean)), lo(T(mean - double(T(mean)))) {}
};

// The mean of a row of C > 0 entries (in double) and 1 / sqrt(var + eps), var the biased
// variance: the mean m in T first, then the entries less m, whose mean r is m's error and whose
// squares give var = mean((x - m)^2) - r^2 (the corrected two-pass form). A row whose sums
// overflow T (float32 entries beyond ~1e36, or a spread beyond ~1e19) takes them in double.
template <class T>
std::pair<double, double> row_moments(const T* x, int64_t C, double eps) {
  const auto in_double = detail::CMapArr<T>(x, C).template cast<double>();
  double sum = row_sums<T>(
                   C, [&](int64_t i, Lanes<T>& f, Lanes<T>&) { f += lanes_at(x + i); },
                   [&](int64_t i, double& f, double&) { f += double(x[i]); })
                   .first;
  if (!std::isfinite(sum)) sum = in_double.sum();  // (an inf or NaN entry stays so)
  const T m = T(sum / double(C));
  auto [off, squares] = row_sums<T>(
      C,
      [&](int64_t i, Lanes<T>& f, Lanes<T>& g) {
        const Lanes<T> d = lanes_at(x + i) - m;
        f += d;
        g += d.square();
      },
      [&](int64_t i, double& f, double& g) {
        const T d = x[i] - m;
        f += double(d);
        g += double(d * d);
      });
  if (!std::isfinite(squares)) {
    off = (in_double - double(m)).sum();
    squares = (in_double - double(m)).square().sum();
  }
  const double r = off / double(C);
  const double var = squares / double(C) - r * r;  // NaN stays NaN; rounding below 0 is 0
  return {double(m) + r, 1.0 / std::sqrt((var < 0 ? 0.0 : var) + eps)};
}

// The entries of p, or C times `fill` where p is undefined (kept in `room`).
template <class T>
const T* entries_or(const Tensor& p, int64_t C, std::vector<T>& room, T fill) {
  if (p.defined()) return p.data<T>();
  room.assign(C, fill);
  return room.data();
}

// The same gradients, row by row, from the forward's mean and 1 / sqrt(var + eps) (stats: rows x
// 2).
template <class T>
Grads layer_norm_kernel(const Tensor& X, const Tensor& W, const Tensor& B, const Tensor& stats,
                        const Tensor& dY) {
  const int64_t C = X.size(-1), rows = C ? X.numel() / C : 0;
  const bool need_x = X.requires_grad(), need_w = W.defined() && W.requires_grad(),
             need_b = B.defined() && B.requires_grad();
  Tensor dX = need_x ? Tensor(X.shape(), X.dtype()) : Tensor();
  std::vector<T> ones;
  const T* pw = entries_or<T>(W, C, ones, T(1));
  // dW and dB sum over the rows: by blocks of kSumRows rows, each block's sums in order (in T),
  // then the blocks' in order (in double), so the threads (which share the blocks) never change a
  // bit of them.
  constexpr int64_t kSumRows = 64;
  const int64_t blocks = (rows + kSumRows - 1) / kSumRows;
  const bool sums = need_w || need_b;
  Tensor partial(Shape{sums ? blocks * 2 * C : 0}, Dtype::f64);  // per block: dW's, dB's
  double* partials = partial.data<double>();
  // each thread's block sums of dW and dB, taken before the threads start (an allocation that
  // fails there throws MemoryError, not inside the parallel region)
  Tensor room(Shape{rows_rooms(), 2 * C}, X.dtype());
  T* rooms = room.data<T>();
  const double* st = stats.data<double>();
  const int64_t full = C - C % kLanes;
  const T* x = X.data<T>();
  const T* pdy = dY.data<T>();
  T* dx = need_x ? dX.data<T>() : nullptr;
  detail::for_parts(
      blocks,
      [&](int64_t first, int64_t end) {
        T* dw = rooms + omp_get_thread_num() * 2 * C;
        T* db = dw + C;
        for (int64_t k = first; k < end; ++k) {
          std::fill_n(dw, 2 * C, T(0));
          for (int64_t r = k * kSumRows; r < std::min(rows, (k + 1) * kSumRows); ++r) {
            const T* xr = x + r * C;
            const Centre<T> c(st[2 * r]);
            const T rstd = T(st[2 * r + 1]);
            const T* dyr = pdy + r * C;
            T g_mean = 0, gx_mean = 0;
            if (need_x) {  // g = dY W: the row's means of g and of g Xhat
              const auto [g_sum, gx_sum] = row_sums<T>(
                  C,
                  [&](int64_t i, Lanes<T>& f, Lanes<T>& h) {
                    const Lanes<T> g = lanes_at(dyr + i) * lanes_at(pw + i);
                    f += g;
                    h += g * (((lanes_at(xr + i) - c.hi) - c.lo) * rstd);
                  },
                  [&](int64_t i, double& f, double& h) {
                    const T g = dyr[i] * pw[i];
                    f += double(g);
                    h += double(g * (((xr[i] - c.hi) - c.lo) * rstd));
                  });
              g_mean = T(g_sum / double(C));
              gx_mean = T(gx_sum / double(C));
            }
            T* dxr = need_x ? dx + r * C : nullptr;
            // kLanes entries at a time, then the rest one by one (the same expressions)
            for (int64_t i = 0; i < full; i += kLanes) {
              const Lanes<T> xhat = ((lanes_at(xr + i) - c.hi) - c.lo) * rstd;
              const auto dy = lanes_at(dyr + i);
              if (need_x)
                Eigen::Map<Lanes<T>>(dxr + i) =
                    rstd * ((dy * lanes_at(pw + i) - g_mean) - xhat * gx_mean);
              if (need_w) Eigen::Map<Lanes<T>>(dw + i) += dy * xhat;
              if (need_b) Eigen::Map<Lanes<T>>(db + i) += dy;
            }
            for (int64_t i = full; i < C; ++i) {
              const T xhat = ((xr[i] - c.hi) - c.lo) * rstd, dy = dyr[i];
              if (need_x) dxr[i] = rstd * ((dy * pw[i] - g_mean) - xhat * gx_mean);
              if (need_w) dw[i] += dy * xhat;
              if (need_b) db[i] += dy;
            }
          }
          if (!sums) continue;
          std::copy_n(dw, C, partials + 2 * k * C);
          std::copy_n(db, C, partials + (2 * k + 1) * C);
        }
      },
      detail::pass_serial_below(C * kSumRows));
  ArrD dw = ArrD::Zero(C), db = ArrD::Zero(C);
  for (int64_t k = 0; k < blocks && sums; ++k) {
    dw += Eigen::Map<const ArrD>(partials + 2 * k * C, C);
    db += Eigen::Map<const ArrD>(partials + (2 * k + 1) * C, C);
  }
  Tensor dW, dB;
  if (need_w) {
    dW = Tensor(W.shape(), W.dtype());
    detail::MapArr<T>(dW.data<T>(), C) = dw.template cast<T>();
  }
  if (need_b) {
    dB = Tensor(B.shape(), B.dtype());
    detail::MapArr<T>(dB.data<T>(), C) = db.template cast<T>();
  }
  return {dX, dW, dB};
}

}  // namespace

Tensor layer_norm(const Tensor& X, const Tensor& W, const Tensor& B, double eps,
                  const std::source_location& where) {
  detail::check_floating("layer_norm", X);
  detail::check_min_rank("layer_norm", X, 1);
  check_affine(X, W, "weight");
  check_affine(X, B, "bias");
  if (!(eps >= 0))
    throw ValueError("layer_norm: eps must be >= 0, got " + std::to_string(eps) + " for input " +
                     X.shape().str());
  const int64_t C = X.size(-1), rows = C ? X.numel() / C : 0;
  Tensor Y(X.shape(), X.dtype());
  Tensor stats(Shape{rows, 2}, Dtype::f64);  // per row: mean, 1 / sqrt(var + eps)
  const Tensor tX = detail::fused_tangent(X, {W, B});  // tY with Y, row by row
  Tensor tY = tX.defined() ? Tensor(X.shape(), X.dtype()) : Tensor();
  dispatch(X.dtype(), [&]<class T>() {
    double* st = stats.data<double>();
    T* y = Y.data<T>();
    std::vector<T> ones, zeros;
    const T* pw = entries_or<T>(W, C, ones, T(1));
    const T* pb = entries_or<T>(B, C, zeros, T(0));
    const T* px = X.data<T>();
    const T* ptx = tX.defined() ? tX.data<T>() : nullptr;
    T* pty = tY.defined() ? tY.data<T>() : nullptr;
    // for the tangent: W in double, each thread's xhat and tx
    const ArrD w = ptx ? ArrD(detail::CMapArr<T>(pw, C).template cast<double>()) : ArrD();
    Tensor room(Shape{ptx ? rows_rooms() : 0, 2 * C}, Dtype::f64);
    double* rooms = room.data<double>();
    detail::for_parts(  // rows are independent: shared among the threads
        rows,
        [&](int64_t first, int64_t end) {
          for (int64_t r = first; r < end; ++r) {
            const T* xr = px + r * C;
            const auto [mean, rstd_d] = row_moments(xr, C, eps);
            st[2 * r] = mean;
            st[2 * r + 1] = rstd_d;
            const Centre<T> c(mean);
            const T rstd = T(rstd_d);
            T* yr = y + r * C;
            for (int64_t i = 0; i < C; ++i) yr[i] = ((xr[i] - c.hi) - c.lo) * rstd * pw[i] + pb[i];
            if (!ptx) continue;
            double* mine = rooms + omp_get_thread_num() * 2 * C;
            Eigen::Map<ArrD> xhat(mine, C), tx(mine + C, C);
            xhat = (detail::CMapArr<T>(xr, C).template cast<double>() - mean) * rstd_d;
            tx = detail::CMapArr<T>(ptx + r * C, C).template cast<double>();
            detail::MapArr<T>(pty + r * C, C) =
                row_tangent(w, rstd_d, xhat, tx).template cast<T>();
          }
        },
        detail::pass_serial_below(C));
  });
  return record("layer_norm", std::move(Y), {X, W, B}, where)
      .saves(X, W)
      .formula([X, W, B, eps](const Tensor& dY) -> Grads {
        return layer_norm_formula(X, W, B, eps, dY);
      })
      .kernel([X, W, B, stats](const Tensor& dY) -> Grads {
        return dispatch(X.dtype(),
                        [&]<class T>() { return layer_norm_kernel<T>(X, W, B, stats, dY); });
      })
      .jvp([&](const Tangents& t) {
        if (tY.defined()) return tY;  // computed with Y
        if (detail::tangent_records({X, W, B, t[0], t[1], t[2]}))
          return layer_norm_jvp(X, W, eps, t);
        return dispatch(X.dtype(),
                        [&]<class T>() { return layer_norm_jvp_kernel<T>(X, W, stats, t); });
      });
}

}  // namespace tg
