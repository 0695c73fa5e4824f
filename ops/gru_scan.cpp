// gru_scan: a GRU layer's recurrence, PyTorch's gate order (r, z, n). For t = 1 .. T:
//   Gh = h_{t-1} W^T + b   (B, 3H)        r = sigmoid(Gi_r + Gh_r),  z = sigmoid(Gi_z + Gh_z),
//   h_t = (1 - z) n + z h_{t-1}            n = tanh(Gi_n + r Gh_n);   Y = (T, B, H): h_1 .. h_T.
// Backward through time: dh is what reaches h_t (from Y and from step t + 1):
//   dn = dh (1 - z) (1 - n^2),  dr = dn Gh_n r (1 - r),  dz = dh (h_{t-1} - n) z (1 - z)
//   dGi_t = [dr, dz, dn],  dGh_t = [dr, dz, dn r]
//   step t - 1 gets dh = dY[t - 1] + dh z + dGh_t W
//   dW = sum_t dGh_t^T h_{t-1},  db = sum of dGh's rows,  dh_0 what reaches step 0.
// Forward mode: the step equations differentiated, with th the tangent of h_t:
//   tGh_t = th_{t-1} W^T + h_{t-1} tW^T + tb
//   tr = (tGi_r + tGh_r) r (1 - r),  tz = (tGi_z + tGh_z) z (1 - z),
//   tn = (tGi_n + tr Gh_n + r tGh_n) (1 - n^2),  th_t = (1 - z) tn + tz (h_{t-1} - n) + z th_{t-1}
//   tY = (T, B, H): th_1 .. th_T.
// One node for the whole sequence: the kernels run one GEMM per step (forward and backward; dW
// is one GEMM over every step) and keep r, z, n and Gh_n; the formula recomputes them with ops,
// step by step, so the op is twice differentiable.

#include <tapegrad/ops/gru_scan.h>

#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/recurrence.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sigmoid.h>
#include <tapegrad/ops/stack.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/tanh.h>

namespace tg {

namespace {

struct GruDims {
  int64_t T, B, H;
};

GruDims check_inputs(const Tensor& gi, const Tensor& W, const Tensor& b, const Tensor& h0) {
  detail::check_defined("gru_scan", gi, "gi");
  detail::check_defined("gru_scan", W, "w_hh");
  detail::check_defined("gru_scan", h0, "h0");
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "gi " + gi.shape().str() + ", w_hh " + W.shape().str() +
           (b.defined() ? ", b_hh " + b.shape().str() : "") + ", h0 " +
           h0.shape().str();
  };
  for (const Tensor* t : {&gi, &W, &b, &h0}) {
    if (!t->defined()) continue;
    if (!is_floating(t->dtype()))
      throw ValueError("gru_scan: needs float32 or float64 tensors, got " +
                       std::string(dtype_name(t->dtype())) + " in " + shapes());
    if (t->dtype() != gi.dtype()) throw ValueError("gru_scan: dtypes differ: " + shapes());
  }
  const auto want = [&] {
    return "gru_scan: needs gi (T, B, 3H), w_hh (3H, H), b_hh (3H,) or none, h0 (B, H); got " +
           shapes();
  };
  if (gi.rank() != 3 || W.rank() != 2 || h0.rank() != 2) throw ShapeError(want());
  const GruDims d{gi.size(0), gi.size(1), W.size(1)};
  if (W.size(0) != 3 * d.H || gi.size(2) != 3 * d.H || h0.shape() != Shape{d.B, d.H} ||
      (b.defined() && b.shape() != Shape{3 * d.H}))
    throw ShapeError(want());
  return d;
}

// Y (T, B, H) and the saved gates S (T, B, 4H): [r, z, n, Gh_n] of every step.
template <class T>
void forward_kernel(const GruDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                    const Tensor& h0, Tensor& Y, Tensor& S) {
  using detail::CMapArr, detail::MapArr;
  const int64_t B = d.B, H = d.H, G = 3 * H, step = B * H;
  std::vector<T> gh(static_cast<std::size_t>(B * G));  // h_{t-1} W^T + b of one step
  const T* w = W.data<T>();
  T* hs = Y.data<T>();
  const detail::StepProduct<T> times_w_t(detail::view(w, G, H).t(), B, d.T);  // h W^T
  for (int64_t t = 0; t < d.T; ++t) {
    const T* h_prev = t ? hs + (t - 1) * step : h0.data<T>();
    times_w_t(h_prev, gh.data(), false);
    for (int64_t r = 0; r < B; ++r) {
      T* ghr = gh.data() + r * G;
      if (b.defined()) MapArr<T>(ghr, G) += CMapArr<T>(b.data<T>(), G);
      const T* gir = gi.data<T>() + (t * B + r) * G;
      T* s = S.data<T>() + (t * B + r) * 4 * H;
      auto rg = MapArr<T>(s, H), zg = MapArr<T>(s + H, H), ng = MapArr<T>(s + 2 * H, H);
      rg = (T(1) + (-(CMapArr<T>(gir, H) + CMapArr<T>(ghr, H))).exp()).inverse();
      zg = (T(1) + (-(CMapArr<T>(gir + H, H) + CMapArr<T>(ghr + H, H))).exp()).inverse();
      MapArr<T>(s + 3 * H, H) = CMapArr<T>(ghr + 2 * H, H);
      ng = (CMapArr<T>(gir + 2 * H, H) + rg * CMapArr<T>(ghr + 2 * H, H)).tanh();
      const auto hp = CMapArr<T>(h_prev + r * H, H);
      MapArr<T>(hs + t * step + r * H, H) = ng + zg * (hp - ng);
    }
  }
}

// dGi, dW, db, dh0 from dY, the output Y and the saved gates S. Without h0_grad (h0 took part in
// the recording without a gradient), dh0 is left undefined and the first step's product with W,
// which only it needs, is skipped.
template <class T>
Grads backward_kernel(const GruDims& d, const Tensor& W, const Tensor& b, const Tensor& h0,
                      const Tensor& Y, const Tensor& S, const Tensor& dY, bool h0_grad) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  using detail::CMapArr, detail::MapArr;
  const int64_t B = d.B, H = d.H, G = 3 * H, step = B * H;
  Tensor dGi(Shape{d.T, B, G}, W.dtype()), dGh(Shape{d.T, B, G}, W.dtype());
  Tensor dh = zeros(Shape{B, H}, W.dtype());
  const T *hs = Y.data<T>(), *w = W.data<T>(), *dy = dY.data<T>();
  Arr dh_t(H), dn(H), db = Arr::Zero(G);
  const detail::StepProduct<T> times_w(detail::view(w, G, H), B, d.T);  // dGh W
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const T* h_prev = t ? hs + (t - 1) * step : h0.data<T>();
    T* dgh_t = dGh.data<T>() + t * B * G;
    for (int64_t r = 0; r < B; ++r) {
      const T* s = S.data<T>() + (t * B + r) * 4 * H;
      const auto rg = CMapArr<T>(s, H), zg = CMapArr<T>(s + H, H), ng = CMapArr<T>(s + 2 * H, H),
                 ghn = CMapArr<T>(s + 3 * H, H), hp = CMapArr<T>(h_prev + r * H, H);
      auto dh_r = MapArr<T>(dh.data<T>() + r * H, H);
      dh_t = dh_r + CMapArr<T>(dy + t * step + r * H, H);
      dn = dh_t * (T(1) - zg) * (T(1) - ng * ng);
      T* gi_row = dGi.data<T>() + (t * B + r) * G;
      T* gh_row = dgh_t + r * G;
      MapArr<T>(gi_row, H) = dn * ghn * (rg * (T(1) - rg));
      MapArr<T>(gi_row + H, H) = dh_t * (hp - ng) * (zg * (T(1) - zg));
      MapArr<T>(gi_row + 2 * H, H) = dn;
      MapArr<T>(gh_row, 2 * H) = CMapArr<T>(gi_row, 2 * H);
      MapArr<T>(gh_row + 2 * H, H) = dn * rg;
      dh_r = dh_t * zg;  // the path through z h_{t-1}; dGh_t W is added below
      if (b.defined()) db += CMapArr<T>(gh_row, G);
    }
    if (t > 0 || h0_grad)
      times_w(dgh_t, dh.data<T>(), true);
  }
  const Tensor dW =
      detail::recurrent_weight_grad<T>(dGh.data<T>(), h0.data<T>(), hs, d.T, B, G, H);
  return {dGi, dW, detail::bias_grad<T>(b, db), h0_grad ? dh : Tensor()};
}

// The same gradients in ops: the forward again, then the steps backward.
Grads gru_scan_formula(const GruDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                       const Tensor& h0, const Tensor& dY) {
  const int64_t B = d.B, H = d.H;
  struct Step {
    Tensor r, z, n, ghn, h_prev;
  };
  std::vector<Step> steps;
  Tensor h = h0;
  for (int64_t t = 0; t < d.T; ++t) {
    const Tensor git = reshape(narrow(gi, 0, t, 1), {B, 3 * H});
    Tensor gh = matmul(h, W, false, true);
    if (b.defined()) gh = add(gh, b);
    Step s{sigmoid(add(narrow(git, 1, 0, H), narrow(gh, 1, 0, H))),
           sigmoid(add(narrow(git, 1, H, H), narrow(gh, 1, H, H))), Tensor(),
           narrow(gh, 1, 2 * H, H), h};
    s.n = tanh(add(narrow(git, 1, 2 * H, H), mul(s.r, s.ghn)));
    h = add(s.n, mul(s.z, sub(h, s.n)));
    steps.push_back(std::move(s));
  }
  Tensor dh = zeros(Shape{B, H}, W.dtype()), dW;
  std::vector<Tensor> dGi(static_cast<std::size_t>(d.T)), dGh(static_cast<std::size_t>(d.T));
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const Step& s = steps[t];
    const Tensor dh_t = add(dh, reshape(narrow(dY, 0, t, 1), {B, H}));
    const Tensor dn = mul(mul(dh_t, sub(1.0, s.z)), sub(1.0, mul(s.n, s.n)));
    const Tensor dr = mul(mul(dn, s.ghn), mul(s.r, sub(1.0, s.r)));
    const Tensor dz = mul(mul(dh_t, sub(s.h_prev, s.n)), mul(s.z, sub(1.0, s.z)));
    dGi[t] = cat({dr, dz, dn}, 1);             // (B, 3H)
    dGh[t] = cat({dr, dz, mul(dn, s.r)}, 1);  // (B, 3H)
    dh = add(mul(dh_t, s.z), matmul(dGh[t], W));
    const Tensor dW_t = matmul(dGh[t], s.h_prev, true, false);  // (3H, H)
    dW = dW.defined() ? add(dW, dW_t) : dW_t;
  }
  if (d.T == 0)
    return {zeros(gi.shape(), gi.dtype()), zeros(W.shape(), W.dtype()),
            b.defined() ? zeros(b.shape(), b.dtype()) : Tensor(), dh};
  return {stack(dGi, 0), dW, b.defined() ? sum_to(stack(dGh, 0), b.shape()) : Tensor(), dh};
}

// The tangent rule in ops: h_{t-1} read from the output Y, the gates recomputed from it for
// every step at once, then the tangents' recurrence (math at the top), one GEMM a step.
Tensor gru_scan_tangent(const GruDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                        const Tensor& h0, const Tangents& t, const Tensor& Y) {
  const int64_t T = d.T, B = d.B, H = d.H;
  if (T == 0) return zeros(Y.shape(), Y.dtype());
  const Tensor h_prev = cat({reshape(h0, {1, B, H}), narrow(Y, 0, 0, T - 1)}, 0);  // (T, B, H)
  Tensor gh = matmul(h_prev, W, false, true);  // (T, B, 3H)
  if (b.defined()) gh = add(gh, b);
  const Tensor rz = sigmoid(add(narrow(gi, 2, 0, 2 * H), narrow(gh, 2, 0, 2 * H)));  // [r, z]
  const Tensor r = narrow(rz, 2, 0, H), z = narrow(rz, 2, H, H), ghn = narrow(gh, 2, 2 * H, H);
  const Tensor n = tanh(add(narrow(gi, 2, 2 * H, H), mul(r, ghn)));  // (T, B, H)
  // tGh's terms outside the recurrence, h_{t-1} tW^T + tb, every step at once
  const Tensor hp_tW = detail::tangent_term(
      t[1], [&](const Tensor& tW) { return matmul(h_prev, tW, false, true); });
  const Tensor tGh_in =
      detail::or_zeros(detail::tangent_sum(hp_tW, t[2], gh.shape()), gh.shape(), Y.dtype());
  auto steps = [](const Tensor& x) { return split(x, 1, 0); };  // T x (1, B, .)
  const std::vector<Tensor> tGi_s = steps(detail::or_zeros(t[0], gi.shape(), Y.dtype())),
                            tGh_in_s = steps(tGh_in), rz_slope_s = steps(mul(rz, sub(1.0, rz))),
                            n_slope_s = steps(sub(1.0, mul(n, n))), r_s = steps(r), z_s = steps(z),
                            ghn_s = steps(ghn), one_minus_z_s = steps(sub(1.0, z)),
                            h_minus_n_s = steps(sub(h_prev, n));
  Tensor th = t[3].defined() ? reshape(t[3], {1, B, H}) : zeros(Shape{1, B, H}, Y.dtype());
  std::vector<Tensor> ths;
  for (int64_t s = 0; s < T; ++s) {
    const Tensor tGh = add(tGh_in_s[s], matmul(th, W, false, true));  // (1, B, 3H)
    const Tensor trz = mul(add(narrow(tGi_s[s], 2, 0, 2 * H), narrow(tGh, 2, 0, 2 * H)),
                           rz_slope_s[s]);  // [tr, tz]
    const Tensor tr = narrow(trz, 2, 0, H), tz = narrow(trz, 2, H, H);
    const Tensor tn = mul(add(narrow(tGi_s[s], 2, 2 * H, H),
                              add(mul(tr, ghn_s[s]), mul(r_s[s], narrow(tGh, 2, 2 * H, H)))),
                          n_slope_s[s]);
    th = add(add(mul(one_minus_z_s[s], tn), mul(tz, h_minus_n_s[s])), mul(z_s[s], th));
    ths.push_back(th);
  }
  return cat(ths, 0);  // (T, B, H)
}

}  // namespace

Tensor gru_scan(const Tensor& gi, const Tensor& W, const Tensor& b, const Tensor& h0,
                const std::source_location& where) {
  const GruDims d = check_inputs(gi, W, b, h0);
  Tensor Y(Shape{d.T, d.B, d.H}, gi.dtype());
  Tensor S(Shape{d.T, d.B, 4 * d.H}, gi.dtype());
  dispatch(gi.dtype(), [&]<class T>() { forward_kernel<T>(d, gi, W, b, h0, Y, S); });
  const bool h0_grad = h0.requires_grad();
  return record("gru_scan", std::move(Y), {gi, W, b, h0}, where)
      .saves(gi, W, b, h0)
      .formula([d, gi, W, b, h0](const Tensor& dY) -> Grads {
        return gru_scan_formula(d, gi, W, b, h0, dY);
      })
      .kernel([d, W, b, h0, S, h0_grad](const Tensor& dY, const Tensor& Y) -> Grads {
        return dispatch(W.dtype(), [&]<class T>() {
          return backward_kernel<T>(d, W, b, h0, Y, S, dY, h0_grad);
        });
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return gru_scan_tangent(d, gi, W, b, h0, t, Y);
      });
}

}  // namespace tg
