// conv2d, as im2col then one matrix product per image and group g (K = C_in / G kH kW taps,
// L = H_out W_out positions):
//   cols = im2col(X)                                  (N, G, K, L)
//   Y[n, g] = W[g] cols[n, g] + b                     W[g] (C_out / G, K) @ (K, L)
// The derivative, with the same pieces (dX is a transposed convolution: the products' adjoint,
// folded back onto the pixels by col2im, im2col's adjoint):
//   dX = col2im(W[g]^T dY[n, g])     dW[g] = sum_n dY[n, g] cols[n, g]^T     db = sum(dY, {0, 2, 3})
// The op is linear in X, in W and in b, so its tangent is two convolutions and the bias term:
//   tY = conv(tX, W) + conv(X, tW) + tb
// conv1d is conv2d on a plane of height 1. The formula (create_graph) is always this one; the
// kernels compute a 3 x 3 kernel at stride 1 over 8 or more channels a group (pytorch/examples'
// conv2 and most CNNs' layers) by Winograd's F(2 x 2, 3 x 3) instead (ops/winograd.h: 2.25x fewer
// multiplications, the same values up to rounding), and the forward of a kernel of at most 27
// taps at stride 1 (a first layer over 1 to 3 channels, conv1) directly (ops/conv_direct.h).

#include <tapegrad/ops/conv.h>

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/conv_direct.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/im2col.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/threads.h>
#include <tapegrad/ops/winograd.h>

namespace tg {

namespace {

using detail::ConvGeometry;
using detail::view;

// The sizes of one convolution, named as in the math above.
struct ConvDims : detail::ConvSizes {
  int64_t Cg() const { return C / G; }            // input channels per group
  int64_t Cout_g() const { return C_out / G; }    // output channels per group
  int64_t K() const { return Cg() * g.taps(); }   // taps per output entry
  int64_t L() const { return g.positions(); }     // output positions per image
  // A 1x1 kernel with unit stride and no padding reads X itself as its columns.
  bool cols_are_input() const {
    return g.taps() == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
  }
  double work() const { return double(N) * C_out * L() * K(); }
};

}  // namespace

std::string Int2::str(int spatial) const {
  if (spatial == 1) return std::to_string(w);
  std::string s = "(";  // appended, not a chain of +: GCC 12 warns falsely (-Wrestrict) on that
  s += std::to_string(h);
  s += ", ";
  s += std::to_string(w);
  s += ")";
  return s;
}

namespace {

// The checks of conv1d (spatial 1) and conv2d (spatial 2), on the caller's own tensors.
void check_conv(const char* op, int spatial, const Tensor& X, const Tensor& W, const Tensor& b,
                Int2 stride, Int2 padding, Int2 dilation, int64_t groups) {
  const std::string o = op;
  detail::check_floating(op, X);
  detail::check_defined(op, W, "weight");
  if (!is_floating(W.dtype()))
    throw ValueError(o + ": weight needs float32 or float64, got " + dtype_name(W.dtype()) +
                     " of shape " + W.shape().str());
  detail::check_same_dtype(op, X, W);
  if (b.defined()) detail::check_same_dtype(op, X, b);
  const int rank = spatial + 2;
  const char* x_form = spatial == 1 ? "(N, C_in, L)" : "(N, C_in, H, W)";
  const char* w_form = spatial == 1 ? "(C_out, C_in / groups, k)" : "(C_out, C_in / groups, kH, kW)";
  if (X.rank() != rank)
    throw ShapeError(o + ": input must be " + x_form + ", got shape " + X.shape().str());
  if (W.rank() != rank)
    throw ShapeError(o + ": weight must be " + w_form + ", got shape " + W.shape().str());
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "input " + X.shape().str() + ", weight " + W.shape().str();
  };
  if (stride.h < 1 || stride.w < 1)
    throw ValueError(o + ": stride must be at least 1, got " + stride.str(spatial));
  if (dilation.h < 1 || dilation.w < 1)
    throw ValueError(o + ": dilation must be at least 1, got " + dilation.str(spatial));
  if (padding.h < 0 || padding.w < 0)
    throw ValueError(o + ": padding must be non-negative, got " + padding.str(spatial));
  if (groups < 1) throw ValueError(o + ": groups must be at least 1, got " + std::to_string(groups));
  const int64_t C = X.size(1), C_out = W.size(0);
  if (C % groups != 0)
    throw ShapeError(o + ": groups = " + std::to_string(groups) + " does not divide C_in = " +
                     std::to_string(C) + ": " + shapes());
  if (C_out % groups != 0)
    throw ShapeError(o + ": groups = " + std::to_string(groups) + " does not divide C_out = " +
                     std::to_string(C_out) + ": " + shapes());
  if (W.size(1) * groups != C)
    throw ShapeError(o + ": channels do not match: " + shapes() + " (C_in = " +
                     std::to_string(C) + ", weight expects C_in / groups = " +
                     std::to_string(W.size(1)) + " with groups = " + std::to_string(groups) + ")");
  if (b.defined() && (b.rank() != 1 || b.size(0) != C_out))
    throw ShapeError(o + ": bias must be (C_out) = (" + std::to_string(C_out) + ",), got shape " +
                     b.shape().str() + " for weight " + W.shape().str());
  for (int a = 2; a < rank; ++a) {
    const bool h = spatial == 2 && a == 2;
    const int64_t k = W.size(a), pad = h ? padding.h : padding.w, d = h ? dilation.h : dilation.w;
    if (d * (k - 1) + 1 > X.size(a) + 2 * pad)
      throw ShapeError(o + ": kernel larger than the padded input: " + shapes() + ", padding " +
                       padding.str(spatial) + ", dilation " + dilation.str(spatial) +
                       " (a kernel of " + std::to_string(k) + " dilated to " +
                       std::to_string(d * (k - 1) + 1) + " over " +
                       std::to_string(X.size(a) + 2 * pad) + " padded entries)");
  }
}

// Runs body(n, slot) for every image n, over OpenMP threads when the work pays for a team;
// slot < team names the thread's scratch. Each image is computed the same way either way.
template <class F>
void for_each_image(int64_t N, int team, F&& body) {
  if (team == 1) {
    for (int64_t n = 0; n < N; ++n) body(n, 0);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t n = 0; n < N; ++n) body(n, omp_get_thread_num());
}

int team_for_images(const ConvDims& s) {
  if (s.N == 1 || s.work() < double(1 << 18)) return 1;
  return static_cast<int>(std::min<int64_t>(detail::team_size(), s.N));
}

// Y (N, C_out, L) = W[g] im2col(X)[n, g] + b, image by image.
template <class T>
void forward_kernel(const ConvDims& s, const T* x, const T* w, const T* b, T* y) {
  if (detail::winograd_fits(s.g, s.Cg()))
    return detail::winograd_forward<T>(s, x, w, b, y);
  const int64_t K = s.K(), L = s.L(), Cout_g = s.Cout_g(), plane = s.C * s.g.H * s.g.W;
  const int team = team_for_images(s);
  if (detail::direct_fits(s.g, K)) {
    const int64_t room = detail::direct_scratch(s);
    Tensor scratch = room ? Tensor({team, room}, dtype_of<T>()) : Tensor();
    T* rooms = room ? scratch.data<T>() : nullptr;  // taken once: data() bumps a version
    for_each_image(s.N, team, [&](int64_t n, int slot) {
      T* buf = rooms ? rooms + slot * room : nullptr;
      detail::direct_image<T>(s, x + n * plane, w, b, y + n * s.C_out * L, buf);
    });
    return;
  }
  Tensor scratch;
  if (!s.cols_are_input()) scratch = Tensor({team, s.C * s.g.taps() * L}, dtype_of<T>());
  T* rooms = scratch.defined() ? scratch.data<T>() : nullptr;  // once: data() bumps a version
  for_each_image(s.N, team, [&](int64_t n, int slot) {
    const T* cols = x + n * plane;  // (C kH kW, L)
    if (!s.cols_are_input()) {
      T* buf = rooms + slot * s.C * s.g.taps() * L;
      detail::im2col_plane(x + n * plane, s.C, s.g, buf);
      cols = buf;
    }
    T* yn = y + n * s.C_out * L;  // (C_out, L)
    for (int64_t gi = 0; gi < s.G; ++gi)
      detail::gemm<T>(view(w + gi * Cout_g * K, Cout_g, K), view(cols + gi * K * L, K, L),
                      view(yn + gi * Cout_g * L, Cout_g, L));
    if (b)
      for (int64_t co = 0; co < s.C_out; ++co)
        detail::MapArr<T>(yn + co * L, L) += b[co];
  });
}

// The formula's gradients computed directly, image by image: dX in parallel (each image its
// own), dW summed over the images in order (so it does not depend on the thread count).
template <class T>
void backward_kernel(const ConvDims& s, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
  const int64_t K = s.K(), L = s.L(), Cout_g = s.Cout_g(), plane = s.C * s.g.H * s.g.W;
  const int64_t rows = s.C * s.g.taps();  // of one image's columns
  if (detail::winograd_fits(s.g, s.Cg())) {
    detail::winograd_backward<T>(s, x, w, dy, dx, dw);
    dx = dw = nullptr;  // done; the bias below
  }
  if (dx) {
    const int team = team_for_images(s);
    Tensor scratch;
    if (!s.cols_are_input()) scratch = Tensor({team, rows * L}, dtype_of<T>());
    T* rooms = scratch.defined() ? scratch.data<T>() : nullptr;  // once: data() bumps a version
    for_each_image(s.N, team, [&](int64_t n, int slot) {
      // dcols[n, g] = W[g]^T dY[n, g], then folded back: dX[n] = col2im(dcols[n])
      T* dcols = s.cols_are_input() ? dx + n * plane : rooms + slot * rows * L;
      for (int64_t gi = 0; gi < s.G; ++gi)
        detail::gemm<T>(view(w + gi * Cout_g * K, Cout_g, K).t(),
                        view(dy + (n * s.C_out + gi * Cout_g) * L, Cout_g, L),
                        view(dcols + gi * K * L, K, L));
      if (!s.cols_are_input()) {
        detail::MapArr<T>(dx + n * plane, plane).setZero();
        detail::col2im_plane(dcols, s.C, s.g, dx + n * plane);
      }
    });
  }
  if (dw) {
    Tensor scratch;
    if (!s.cols_are_input()) scratch = Tensor({rows * L}, dtype_of<T>());
    for (int64_t n = 0; n < s.N; ++n) {
      const T* cols = x + n * plane;
      if (!s.cols_are_input()) {
        detail::im2col_plane(x + n * plane, s.C, s.g, scratch.data<T>());
        cols = scratch.data<T>();
      }
      // dW[g] += dY[n, g] cols[n, g]^T
      for (int64_t gi = 0; gi < s.G; ++gi)
        detail::gemm<T>(view(dy + (n * s.C_out + gi * Cout_g) * L, Cout_g, L),
                        view(cols + gi * K * L, K, L).t(), view(dw + gi * Cout_g * K, Cout_g, K),
                        T(1), n == 0 ? T(0) : T(1));
    }
  }
  if (db) {
    for (int64_t co = 0; co < s.C_out; ++co) db[co] = T(0);
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t co = 0; co < s.C_out; ++co)
        db[co] += detail::CMapArr<T>(dy + (n * s.C_out + co) * L, L).sum();
  }
}

// (below: the tangent rule convolves the tangents with it)
Tensor conv_checked(const char* op, const Tensor& X, const Tensor& W, const Tensor& b,
                    Int2 stride, Int2 padding, Int2 dilation, int64_t groups,
                    const std::source_location& where);

// The tangent rule: tY = conv(tX, W) + conv(X, tW) + tb, a term for each tangent there is.
Tensor conv_tangent(const char* op, const Tensor& X, const Tensor& W, const Tangents& t,
                    const Shape& y_shape, Int2 stride, Int2 padding, Int2 dilation,
                    int64_t groups, const std::source_location& where) {
  auto conv = [&](const Tensor& x, const Tensor& w) {
    return conv_checked(op, x, w, Tensor(), stride, padding, dilation, groups, where);
  };
  const Tensor tY_X = detail::tangent_term(t[0], [&](const Tensor& tX) { return conv(tX, W); });
  const Tensor tY_W = detail::tangent_term(t[1], [&](const Tensor& tW) { return conv(X, tW); });
  const Tensor tY_b = detail::tangent_term(t[2], [&](const Tensor& tb) {
    return reshape(tb, {1, tb.size(0), 1, 1}, where);  // (1, C_out, 1, 1)
  });
  return detail::tangent_sum(detail::tangent_sum(tY_X, tY_W, y_shape), tY_b, y_shape);
}

// conv2d on checked 4-D tensors (conv1d's reshaped ones too), recorded as `op`.
Tensor conv_checked(const char* op, const Tensor& X, const Tensor& W, const Tensor& b,
                    Int2 stride, Int2 padding, Int2 dilation, int64_t groups,
                    const std::source_location& where) {
  ConvDims s{{X.size(0), X.size(1), W.size(0), groups,
              ConvGeometry{X.size(2), X.size(3), W.size(2), W.size(3), stride.h, stride.w,
                           padding.h, padding.w, dilation.h, dilation.w}}};
  const int64_t Ho = s.g.H_out(), Wo = s.g.W_out();
  Tensor Y({s.N, s.C_out, Ho, Wo}, X.dtype());  // (N, C_out, H_out, W_out)
  if (Y.numel() > 0)
    dispatch(X.dtype(), [&]<class T>() {
      forward_kernel<T>(s, X.data<T>(), W.data<T>(), b.defined() ? b.data<T>() : nullptr,
                        Y.data<T>());
    });
  std::vector<Tensor> inputs{X, W};
  if (b.defined()) inputs.push_back(b);
  return record(op, std::move(Y), std::span<const Tensor>(inputs), where)
      .saves(X, W)
      .formula([X, W, b, s, where](const Tensor& dY) -> Grads {
        const int64_t G = s.G, N = s.N, K = s.K(), L = s.L(), Cout_g = s.Cout_g();
        const Tensor dYg = reshape(dY, {N, G, Cout_g, L}, where);
        Tensor dX, dW, db;
        if (X.requires_grad()) {
          const Tensor Wg = reshape(W, {G, Cout_g, K}, where);
          const Tensor dcols = matmul(Wg, dYg, true, false, where);  // (N, G, K, L)
          dX = detail::col2im(reshape(dcols, {N, G * K, L}, where), s.g, where);
        }
        if (W.requires_grad()) {
          const Tensor cols = reshape(detail::im2col(X, s.g, where), {N, G, K, L}, where);
          dW = reshape(sum(matmul(dYg, cols, false, true, where), 0, false, where),
                       W.shape().vec(), where);  // sum_n (N, G, C_out / G, K)
        }
        if (b.defined() && b.requires_grad()) db = sum(dY, std::vector<int>{0, 2, 3}, false, where);
        return {dX, dW, db};
      })
      .kernel([X, W, b, s](const Tensor& dY) -> Grads {
        Tensor dX, dW, db;
        if (X.requires_grad()) dX = Tensor(X.shape(), X.dtype());
        if (W.requires_grad()) dW = Tensor(W.shape(), W.dtype());
        if (b.defined() && b.requires_grad()) db = Tensor(b.shape(), b.dtype());
        dispatch(X.dtype(), [&]<class T>() {
          auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
          if (dY.numel() == 0) {
            for (Tensor* t : {&dX, &dW, &db})
              if (t->defined()) detail::MapArr<T>(t->data<T>(), t->numel()).setZero();
            return;
          }
          backward_kernel<T>(s, X.data<T>(), W.data<T>(), dY.data<T>(), ptr(dX), ptr(dW), ptr(db));
        });
        return {dX, dW, db};
      })
      .jvp([&](const Tangents& t,
                                                                const Tensor& Y) {
        return conv_tangent(op, X, W, t, Y.shape(), stride, padding, dilation, groups, where);
      });
}

}  // namespace

Tensor conv2d(const Tensor& X, const Tensor& W, const Tensor& b, Int2 stride, Int2 padding,
              Int2 dilation, int64_t groups, const std::source_location& where) {
  check_conv("conv2d", 2, X, W, b, stride, padding, dilation, groups);
  return conv_checked("conv2d", X, W, b, stride, padding, dilation, groups, where);
}

Tensor conv1d(const Tensor& X, const Tensor& W, const Tensor& b, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups, const std::source_location& where) {
  check_conv("conv1d", 1, X, W, b, {1, stride}, {0, padding}, {1, dilation}, groups);
  const Tensor X4 = reshape(X, {X.size(0), X.size(1), 1, X.size(2)}, where);  // (N, C_in, 1, L)
  const Tensor W4 = reshape(W, {W.size(0), W.size(1), 1, W.size(2)}, where);  // (C_out, C_g, 1, k)
  const Tensor Y = conv_checked("conv1d", X4, W4, b, {1, stride}, {0, padding}, {1, dilation},
                                groups, where);  // (N, C_out, 1, L_out)
  return reshape(Y, {Y.size(0), Y.size(1), Y.size(3)}, where);
}

}  // namespace tg
