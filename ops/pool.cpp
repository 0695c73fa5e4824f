// max_pool2d: Y[n, c, o] = X[n, c, i*] with i* = argmax over the window of o (the first maximum,
//   as PyTorch; padding is -inf, so never chosen over a real entry).
//   dX = zeros, then dX[n, c, i*] += dY[n, c, o]: a scatter by the saved indices, which is its
//   own op (max_pool_scatter) whose derivative is the gather d(dY)[n, c, o] = ddX[n, c, i*]
//   (max_pool_gather), and the other way round, so both orders are differentiable.
//   tY[n, c, o] = tX[n, c, i*]: the same gather (i* held fixed); the scatter and the gather are
//   linear, so each one's tangent is itself applied to the tangent.
// avg_pool2d (count_include_pad): Y = conv2d of every channel with a kernel of 1 / (kH kW),
//   so its derivative is conv2d's. The 1-D pools are the 2-D ones on planes of height 1.

#include <tapegrad/ops/pool.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

Tensor max_pool_gather(const Tensor& X, const Tensor& idx, bool tiles_2x2,
                       const std::source_location& where);

void check_pool(const char* op, int spatial, const Tensor& X, Int2 kernel, Int2 stride,
                Int2 padding) {
  const std::string o = op;
  detail::check_floating(op, X);
  if (X.rank() != spatial + 2)
    throw ShapeError(o + ": input must be " + (spatial == 1 ? "(N, C, L)" : "(N, C, H, W)") +
                     ", got shape " + X.shape().str());
  const auto at = [&] { return " for input " + X.shape().str(); };  // made only when thrown
  if (kernel.h < 1 || kernel.w < 1)
    throw ValueError(o + ": kernel must be at least 1, got " + kernel.str(spatial) + at());
  if (stride.h < 1 || stride.w < 1)
    throw ValueError(o + ": stride must be at least 1, got " + stride.str(spatial) + at());
  if (padding.h < 0 || padding.w < 0)
    throw ValueError(o + ": padding must be non-negative, got " + padding.str(spatial) + at());
  if (2 * padding.h > kernel.h || 2 * padding.w > kernel.w)
    throw ValueError(o + ": padding must be at most half the kernel, got padding " +
                     padding.str(spatial) + " for kernel " + kernel.str(spatial) + at());
  const int64_t H = spatial == 1 ? 1 : X.size(2), W = X.size(-1);
  if (kernel.h > H + 2 * padding.h || kernel.w > W + 2 * padding.w)
    throw ShapeError(o + ": kernel " + kernel.str(spatial) +
                     " is larger than the padded input" + at() + " with padding " +
                     padding.str(spatial));
}

// The threads for a pass over `entries` entries of planes: one below 2^18.
int team_for(int64_t entries) { return entries < (int64_t{1} << 18) ? 1 : detail::team_size(); }

// One plane of max_pool_scatter when the windows are the plane's 2 x 2 tiles (kernel 2, stride
// 2, no padding: every entry in at most one window). Each tile's four entries are written at once
// (0 + dY at its maximum, as the general scatter's zeros and sum make it, so -0 becomes 0), and
// the odd last row and column, in no window, are zeros.
template <class T>
void scatter_tiles_2x2(const T* __restrict dy, const int64_t* __restrict ix, int64_t H, int64_t W,
                       T* __restrict dx) {
  const int64_t Ho = H / 2, Wo = W / 2;
  for (int64_t oh = 0; oh < Ho; ++oh) {
    T *r0 = dx + 2 * oh * W, *r1 = r0 + W;
    const int64_t i0 = 2 * oh * W;
#pragma omp simd
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t at = ix[oh * Wo + ow] - (i0 + 2 * ow);  // 0, 1, W or W + 1
      const T g = T(0) + dy[oh * Wo + ow];
      r0[2 * ow] = at == 0 ? g : T(0), r0[2 * ow + 1] = at == 1 ? g : T(0);
      r1[2 * ow] = at == W ? g : T(0), r1[2 * ow + 1] = at == W + 1 ? g : T(0);
    }
    if (W % 2) r0[W - 1] = r1[W - 1] = T(0);
  }
  if (H % 2) std::fill(dx + (H - 1) * W, dx + H * W, T(0));
}

// dX (shape, planes P of H W) = zeros, then dX[p, idx[p, o]] += dY[p, o]. tiles_2x2: the windows
// were the planes' 2 x 2 tiles (max_pool_plane_2x2's), so no entry is in two.
Tensor max_pool_scatter(const Tensor& dY, const Tensor& idx, const Shape& shape, bool tiles_2x2,
                        const std::source_location& where) {
  Tensor dX(shape, dY.dtype());
  const int64_t P = shape[0] * shape[1], H = shape[2], W = shape[3], HW = H * W;
  const int64_t O = P ? dY.numel() / P : 0;  // no planes (N or C 0): nothing to write
  const int team = team_for(shape.numel());
  dispatch(dY.dtype(), [&]<class T>() {
    const int64_t* ix = idx.data<int64_t>();
    const T* dy = dY.data<T>();
    T* dx = dX.data<T>();
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t* ixp = ix + p * O;
      const T* dyp = dy + p * O;
      T* dxp = dx + p * HW;
      if (tiles_2x2) {
        scatter_tiles_2x2(dyp, ixp, H, W, dxp);
        continue;
      }
      std::fill(dxp, dxp + HW, T(0));
      for (int64_t o = 0; o < O; ++o) dxp[ixp[o]] += dyp[o];
    }
  });
  return record("max_pool_scatter", std::move(dX), {dY}, where)
      .saves(idx)
      .formula([idx, tiles_2x2, where](const Tensor& ddX) -> Grads {
        return {max_pool_gather(ddX, idx, tiles_2x2, where)};
      })
      .jvp([&](const Tangents& t) {
        return max_pool_scatter(t[0], idx, shape, tiles_2x2, where);
      });
}

// Y[p, o] = X[p, idx[p, o]] over the planes p of X. tiles_2x2 as max_pool_scatter's.
Tensor max_pool_gather(const Tensor& X, const Tensor& idx, bool tiles_2x2,
                       const std::source_location& where) {
  Tensor Y(idx.shape(), X.dtype());
  const int64_t P = X.size(0) * X.size(1), HW = P ? X.numel() / P : 0, O = P ? idx.numel() / P : 0;
  dispatch(X.dtype(), [&]<class T>() {
    const int64_t* ix = idx.data<int64_t>();
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    for (int64_t p = 0; p < P; ++p)
      for (int64_t o = 0; o < O; ++o) y[p * O + o] = x[p * HW + ix[p * O + o]];
  });
  const Shape shape = X.shape();
  return record("max_pool_gather", std::move(Y), {X}, where)
      .saves(idx)
      .formula([idx, shape, tiles_2x2, where](const Tensor& dY) -> Grads {
        return {max_pool_scatter(dY, idx, shape, tiles_2x2, where)};
      })
      .jvp([&](const Tangents& t) { return max_pool_gather(t[0], idx, tiles_2x2, where); });
}

// Output sizes (checked above to be at least 1).
int64_t pooled(int64_t n, int64_t k, int64_t s, int64_t p) { return (n + 2 * p - k) / s + 1; }

// One (H, W) plane into y (H_out, W_out) and the flat index of each window's maximum, with
// PyTorch's rule: start from -inf at the window's first real entry, take an entry that is
// greater or NaN (so the first maximum wins, and the last NaN).
template <class T>
void max_pool_plane(const T* x, int64_t H, int64_t W, Int2 k, Int2 s, Int2 p, int64_t Ho,
                    int64_t Wo, T* y, int64_t* ix) {
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const int64_t h0 = std::max<int64_t>(oh * s.h - p.h, 0), h1 = std::min(oh * s.h - p.h + k.h, H);
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t w0 = std::max<int64_t>(ow * s.w - p.w, 0), w1 = std::min(ow * s.w - p.w + k.w, W);
      T best = -std::numeric_limits<T>::infinity();
      int64_t at = h0 * W + w0;
      for (int64_t ih = h0; ih < h1; ++ih)
        for (int64_t iw = w0; iw < w1; ++iw) {
          const T v = x[ih * W + iw];
          if (v > best || std::isnan(v)) {
            best = v;
            at = ih * W + iw;
          }
        }
      y[oh * Wo + ow] = best;
      ix[oh * Wo + ow] = at;
    }
  }
}

// max_pool_plane for the common 2 x 2 window at stride 2 without padding, by the same rule
// (starting from the window's first entry is the same as starting from -inf there), in one pass
// over two input rows per output row.
template <class T>
void max_pool_plane_2x2(const T* __restrict x, int64_t W, int64_t Ho, int64_t Wo, T* __restrict y,
                        int64_t* __restrict ix) {
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const T *r0 = x + 2 * oh * W, *r1 = r0 + W;
    const int64_t i0 = 2 * oh * W;
#pragma omp simd
    for (int64_t ow = 0; ow < Wo; ++ow) {
      T best = r0[2 * ow];
      int64_t at = i0 + 2 * ow;
      const T v1 = r0[2 * ow + 1], v2 = r1[2 * ow], v3 = r1[2 * ow + 1];
      if (v1 > best || v1 != v1) best = v1, at = i0 + 2 * ow + 1;
      if (v2 > best || v2 != v2) best = v2, at = i0 + W + 2 * ow;
      if (v3 > best || v3 != v3) best = v3, at = i0 + W + 2 * ow + 1;
      y[oh * Wo + ow] = best;
      ix[oh * Wo + ow] = at;
    }
  }
}

// On a checked (N, C, H, W) input.
Tensor max_pool_checked(const char* op, const Tensor& X, Int2 k, Int2 s, Int2 p,
                        const std::source_location& where) {
  const int64_t N = X.size(0), C = X.size(1), H = X.size(2), W = X.size(3);
  const int64_t Ho = pooled(H, k.h, s.h, p.h), Wo = pooled(W, k.w, s.w, p.w);
  Tensor Y({N, C, Ho, Wo}, X.dtype());  // (N, C, H_out, W_out)
  Tensor idx({N, C, Ho, Wo}, Dtype::i64);  // flat index of each maximum in its (H, W) plane
  const int64_t planes = N * C, plane_in = H * W, plane_out = Ho * Wo;
  const int team = team_for(planes * plane_out * k.h * k.w);
  const bool two_by_two = k.h == 2 && k.w == 2 && s.h == 2 && s.w == 2 && p.h == 0 && p.w == 0;
  dispatch(X.dtype(), [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    int64_t* ix = idx.data<int64_t>();
#pragma omp parallel for schedule(static) num_threads(team) if (team > 1)
    for (int64_t pl = 0; pl < planes; ++pl)
      if (two_by_two)
        max_pool_plane_2x2(x + pl * plane_in, W, Ho, Wo, y + pl * plane_out, ix + pl * plane_out);
      else
        max_pool_plane(x + pl * plane_in, H, W, k, s, p, Ho, Wo, y + pl * plane_out, ix + pl * plane_out);
  });
  const Shape shape = X.shape();
  return record(op, std::move(Y), {X}, where)
      .saves(idx)
      .formula([idx, shape, two_by_two, where](const Tensor& dY) -> Grads {
        return {max_pool_scatter(dY, idx, shape, two_by_two, where)};  // dX
      })
      .jvp([&](const Tangents& t) {  // tY
        return max_pool_gather(t[0], idx, two_by_two, where);
      });
}

// Every channel convolved with a kernel of 1 / (kH kW), on a checked (N, C, H, W) input.
Tensor avg_pool_checked(const Tensor& X, Int2 k, Int2 s, Int2 p,
                        const std::source_location& where) {
  const int64_t N = X.size(0), C = X.size(1), H = X.size(2), W = X.size(3);
  const Tensor ones_k = full({1, 1, k.h, k.w}, 1.0 / static_cast<double>(k.h * k.w), X.dtype());
  const Tensor Y = conv2d(reshape(X, {N * C, 1, H, W}, where), ones_k, Tensor(), s, p, 1, 1,
                          where);  // (N C, 1, H_out, W_out)
  return reshape(Y, {N, C, Y.size(2), Y.size(3)}, where);
}

}  // namespace

Tensor max_pool2d(const Tensor& X, Int2 kernel, const std::source_location& where) {
  return max_pool2d(X, kernel, kernel, 0, where);
}

Tensor max_pool2d(const Tensor& X, Int2 kernel, Int2 stride, Int2 padding,
                  const std::source_location& where) {
  check_pool("max_pool2d", 2, X, kernel, stride, padding);
  return max_pool_checked("max_pool2d", X, kernel, stride, padding, where);
}

Tensor avg_pool2d(const Tensor& X, Int2 kernel, const std::source_location& where) {
  return avg_pool2d(X, kernel, kernel, 0, where);
}

Tensor avg_pool2d(const Tensor& X, Int2 kernel, Int2 stride, Int2 padding,
                  const std::source_location& where) {
  check_pool("avg_pool2d", 2, X, kernel, stride, padding);
  return avg_pool_checked(X, kernel, stride, padding, where);
}

Tensor max_pool1d(const Tensor& X, int64_t kernel, const std::source_location& where) {
  return max_pool1d(X, kernel, kernel, 0, where);
}

Tensor max_pool1d(const Tensor& X, int64_t kernel, int64_t stride, int64_t padding,
                  const std::source_location& where) {
  check_pool("max_pool1d", 1, X, {1, kernel}, {1, stride}, {0, padding});
  const Tensor Y = max_pool_checked("max_pool1d", reshape(X, {X.size(0), X.size(1), 1, X.size(2)}, where),
                                    {1, kernel}, {1, stride}, {0, padding}, where);
  return reshape(Y, {Y.size(0), Y.size(1), Y.size(3)}, where);  // (N, C, L_out)
}

Tensor avg_pool1d(const Tensor& X, int64_t kernel, const std::source_location& where) {
  return avg_pool1d(X, kernel, kernel, 0, where);
}

Tensor avg_pool1d(const Tensor& X, int64_t kernel, int64_t stride, int64_t padding,
                  const std::source_location& where) {
  check_pool("avg_pool1d", 1, X, {1, kernel}, {1, stride}, {0, padding});
  const Tensor Y = avg_pool_checked(reshape(X, {X.size(0), X.size(1), 1, X.size(2)}, where),
                                    {1, kernel}, {1, stride}, {0, padding}, where);
  return reshape(Y, {Y.size(0), Y.size(1), Y.size(3)}, where);  // (N, C, L_out)
}

}  // namespace tg
