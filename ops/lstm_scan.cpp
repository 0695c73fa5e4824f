// lstm_scan: an LSTM layer's recurrence, PyTorch's gate order (i, f, g, o). For t = 1 .. T:
//   G_t = Gi_t + h_{t-1} W^T + b   (B, 4H)   i, f, o = sigmoid(G_t's blocks 0, 1, 3),
//   c_t = f c_{t-1} + i g                     g = tanh(G_t's block 2),
//   h_t = o tanh(c_t)                         Y = (2, T, B, H): [h_1 .. h_T], [c_1 .. c_T].
// Backward through time: dh, dc are what reaches h_t and c_t (from Y and from step t + 1):
//   dc += dh o (1 - tanh(c_t)^2)
//   dG_t = [dc g i (1 - i),  dc c_{t-1} f (1 - f),  dc i (1 - g^2),  dh tanh(c_t) o (1 - o)]
//   step t - 1 gets dh = dY_h[t - 1] + dG_t W  and  dc = dY_c[t - 1] + dc f
//   dGi = dG,  dW = sum_t dG_t^T h_{t-1},  db = sum of dG's rows,  dh_0, dc_0 what reaches step 0.
// Forward mode: the step equations differentiated, with tc, th the tangents of c_t, h_t:
//   tG_t = tGi_t + th_{t-1} W^T + h_{t-1} tW^T + tb
//   [ti, tf, tg, to] = tG_t * [i (1 - i), f (1 - f), 1 - g^2, o (1 - o)]
//   tc_t = tf c_{t-1} + f tc_{t-1} + ti g + i tg,   th_t = to tanh(c_t) + o (1 - tanh(c_t)^2) tc_t
//   tY = (2, T, B, H): [th_1 .. th_T], [tc_1 .. tc_T].
// One node for the whole sequence: the kernels run one GEMM per step (forward and backward; dW
// is one GEMM over every step) and keep the gate activations; the formula recomputes them with
// ops, step by step, so the op is twice differentiable.

#include <tapegrad/ops/lstm_scan.h>

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

struct LstmDims {
  int64_t T, B, H;
};

LstmDims check_inputs(const Tensor& gi, const Tensor& W, const Tensor& b, const Tensor& h0,
                  const Tensor& c0) {
  detail::check_defined("lstm_scan", gi, "gi");
  detail::check_defined("lstm_scan", W, "w_hh");
  detail::check_defined("lstm_scan", h0, "h0");
  detail::check_defined("lstm_scan", c0, "c0");
  const auto shapes = [&] {  // the message's part, made only when thrown
    return "gi " + gi.shape().str() + ", w_hh " + W.shape().str() +
           (b.defined() ? ", bias " + b.shape().str() : "") + ", h0 " +
           h0.shape().str() + ", c0 " + c0.shape().str();
  };
  for (const Tensor* t : {&gi, &W, &b, &h0, &c0}) {
    if (!t->defined()) continue;
    if (!is_floating(t->dtype()))
      throw ValueError("lstm_scan: needs float32 or float64 tensors, got " +
                       std::string(dtype_name(t->dtype())) + " in " + shapes());
    if (t->dtype() != gi.dtype()) throw ValueError("lstm_scan: dtypes differ: " + shapes());
  }
  const auto want = [&] {
    return "lstm_scan: needs gi (T, B, 4H), w_hh (4H, H), bias (4H,) or none, h0 and c0 (B, H); "
           "got " + shapes();
  };
  if (gi.rank() != 3 || W.rank() != 2 || h0.rank() != 2 || c0.rank() != 2) throw ShapeError(want());
  const LstmDims d{gi.size(0), gi.size(1), W.size(1)};
  const Shape state{d.B, d.H};
  if (W.size(0) != 4 * d.H || gi.size(2) != 4 * d.H || h0.shape() != state ||
      c0.shape() != state || (b.defined() && b.shape() != Shape{4 * d.H}))
    throw ShapeError(want());
  return d;
}

// Y (2, T, B, H), the gate activations A (T, B, 4H): [i, f, g, o] of every step, and tanh(c_t)
// of every step, C (T, B, H), for the backward.
template <class T>
void forward_kernel(const LstmDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                    const Tensor& h0, const Tensor& c0, Tensor& Y, Tensor& A, Tensor& C) {
  using detail::CMapArr, detail::MapArr;
  const int64_t B = d.B, H = d.H, G = 4 * H, step = B * H;
  const T* w = W.data<T>();
  T* hs = Y.data<T>();
  T* cs = hs + d.T * step;
  const detail::StepProduct<T> times_w_t(detail::view(w, G, H).t(), B, d.T);  // h W^T
  // taken once: data() bumps a version
  T *a0 = A.data<T>(), *tanh_c = C.data<T>();
  const T *gi0 = gi.data<T>(), *bias = b.defined() ? b.data<T>() : nullptr;
  for (int64_t t = 0; t < d.T; ++t) {
    T* a = a0 + t * B * G;
    const T* gi_t = gi0 + t * B * G;
    const T* h_prev = t ? hs + (t - 1) * step : h0.data<T>();
    const T* c_prev = t ? cs + (t - 1) * step : c0.data<T>();
    times_w_t(h_prev, a, false);
    for (int64_t r = 0; r < B; ++r) {
      T* row = a + r * G;
      auto a_row = MapArr<T>(row, G);
      const auto gi_row = CMapArr<T>(gi_t + r * G, G);
      if (bias)  // (a + gi) + b, in one pass
        a_row = a_row + gi_row + CMapArr<T>(bias, G);
      else
        a_row += gi_row;
      auto i = MapArr<T>(row, H), f = MapArr<T>(row + H, H), g = MapArr<T>(row + 2 * H, H),
           o = MapArr<T>(row + 3 * H, H);
      i = (T(1) + (-i).exp()).inverse();
      f = (T(1) + (-f).exp()).inverse();
      g = g.tanh();
      o = (T(1) + (-o).exp()).inverse();
      auto c = MapArr<T>(cs + t * step + r * H, H);
      c = f * CMapArr<T>(c_prev + r * H, H) + i * g;
      auto tc = MapArr<T>(tanh_c + t * step + r * H, H);
      tc = c.tanh();
      MapArr<T>(hs + t * step + r * H, H) = o * tc;
    }
  }
}

// dGi, dW, db, dh0, dc0 from dY, the output Y, the activations A and tanh(c), C. Without
// state_grads (neither h0 nor c0 took part in the recording with a gradient), dh0 and dc0 are
// left undefined and the first step's product with W, which only they need, is skipped.
template <class T>
Grads backward_kernel(const LstmDims& d, const Tensor& W, const Tensor& b, const Tensor& h0,
                      const Tensor& c0, const Tensor& Y, const Tensor& A, const Tensor& C,
                      const Tensor& dY, bool state_grads) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  using detail::CMapArr, detail::MapArr;
  const int64_t B = d.B, H = d.H, G = 4 * H, step = B * H;
  Tensor dGi(Shape{d.T, B, G}, W.dtype());
  Tensor dh = zeros(Shape{B, H}, W.dtype()), dc = zeros(Shape{B, H}, W.dtype());
  const T *hs = Y.data<T>(), *cs = hs + d.T * step, *w = W.data<T>();
  const T *dyh = dY.data<T>(), *dyc = dyh + d.T * step;
  Arr dh_t(H), dc_t(H), db = Arr::Zero(G);
  const detail::StepProduct<T> times_w(detail::view(w, G, H), B, d.T);  // dG W
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const T* c_prev = t ? cs + (t - 1) * step : c0.data<T>();
    T* dg_t = dGi.data<T>() + t * B * G;
    for (int64_t r = 0; r < B; ++r) {
      const T* a = A.data<T>() + (t * B + r) * G;
      const auto i = CMapArr<T>(a, H), f = CMapArr<T>(a + H, H), g = CMapArr<T>(a + 2 * H, H),
                 o = CMapArr<T>(a + 3 * H, H);
      const int64_t at = t * step + r * H;
      const auto tc = CMapArr<T>(C.data<T>() + at, H);
      auto dh_r = MapArr<T>(dh.data<T>() + r * H, H), dc_r = MapArr<T>(dc.data<T>() + r * H, H);
      dh_t = dh_r + CMapArr<T>(dyh + at, H);
      dc_t = dc_r + CMapArr<T>(dyc + at, H) + dh_t * o * (T(1) - tc * tc);
      T* row = dg_t + r * G;
      MapArr<T>(row, H) = dc_t * g * (i * (T(1) - i));
      MapArr<T>(row + H, H) = dc_t * CMapArr<T>(c_prev + r * H, H) * (f * (T(1) - f));
      MapArr<T>(row + 2 * H, H) = dc_t * i * (T(1) - g * g);
      MapArr<T>(row + 3 * H, H) = dh_t * tc * (o * (T(1) - o));
      dc_r = dc_t * f;
      if (b.defined()) db += CMapArr<T>(row, G);
    }
    if (t > 0 || state_grads)
      times_w(dg_t, dh.data<T>(), false);
  }
  const Tensor dW =
      detail::recurrent_weight_grad<T>(dGi.data<T>(), h0.data<T>(), hs, d.T, B, G, H);
  if (!state_grads) return {dGi, dW, detail::bias_grad<T>(b, db), Tensor(), Tensor()};
  return {dGi, dW, detail::bias_grad<T>(b, db), dh, dc};
}

// The same gradients in ops: the forward again, then the steps backward.
Grads lstm_scan_formula(const LstmDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                        const Tensor& h0, const Tensor& c0, const Tensor& dY) {
  const int64_t B = d.B, H = d.H;
  struct Step {
    Tensor i, f, g, o, tc, h_prev, c_prev;
  };
  std::vector<Step> steps;
  Tensor h = h0, c = c0;
  for (int64_t t = 0; t < d.T; ++t) {
    Tensor G = add(reshape(narrow(gi, 0, t, 1), {B, 4 * H}), matmul(h, W, false, true));
    if (b.defined()) G = add(G, b);
    Step s{sigmoid(narrow(G, 1, 0, H)), sigmoid(narrow(G, 1, H, H)), tanh(narrow(G, 1, 2 * H, H)),
           sigmoid(narrow(G, 1, 3 * H, H)), Tensor(), h, c};
    c = add(mul(s.f, c), mul(s.i, s.g));
    s.tc = tanh(c);
    h = mul(s.o, s.tc);
    steps.push_back(std::move(s));
  }
  const Tensor dYh = reshape(narrow(dY, 0, 0, 1), {d.T, B, H});
  const Tensor dYc = reshape(narrow(dY, 0, 1, 1), {d.T, B, H});
  Tensor dh = zeros(Shape{B, H}, W.dtype()), dc = zeros(Shape{B, H}, W.dtype()), dW;
  std::vector<Tensor> dG(static_cast<std::size_t>(d.T));
  for (int64_t t = d.T - 1; t >= 0; --t) {
    const Step& s = steps[t];
    const Tensor dh_t = add(dh, reshape(narrow(dYh, 0, t, 1), {B, H}));
    const Tensor dc_t = add(add(dc, reshape(narrow(dYc, 0, t, 1), {B, H})),
                            mul(mul(dh_t, s.o), sub(1.0, mul(s.tc, s.tc))));
    const Tensor di = mul(mul(dc_t, s.g), mul(s.i, sub(1.0, s.i)));
    const Tensor df = mul(mul(dc_t, s.c_prev), mul(s.f, sub(1.0, s.f)));
    const Tensor dg = mul(mul(dc_t, s.i), sub(1.0, mul(s.g, s.g)));
    const Tensor do_ = mul(mul(dh_t, s.tc), mul(s.o, sub(1.0, s.o)));
    dG[t] = cat({di, df, dg, do_}, 1);  // (B, 4H)
    dc = mul(dc_t, s.f);
    dh = matmul(dG[t], W);
    const Tensor dW_t = matmul(dG[t], s.h_prev, true, false);  // (4H, H)
    dW = dW.defined() ? add(dW, dW_t) : dW_t;
  }
  if (d.T == 0)
    return {zeros(gi.shape(), gi.dtype()), zeros(W.shape(), W.dtype()),
            b.defined() ? zeros(b.shape(), b.dtype()) : Tensor(), dh, dc};
  const Tensor dGi = stack(dG, 0);  // (T, B, 4H)
  return {dGi, dW, b.defined() ? sum_to(dGi, b.shape()) : Tensor(), dh, dc};
}

// x_{t-1} of every step, (T, B, H): x0 (B, H), then xs (T, B, H) but its last; T >= 1.
Tensor previous(const Tensor& x0, const Tensor& xs) {
  return cat({reshape(x0, {1, x0.size(0), x0.size(1)}), narrow(xs, 0, 0, xs.size(0) - 1)}, 0);
}

// The tangent rule in ops: h_{t-1} and c_{t-1} read from the output Y, the gates recomputed from
// them for every step at once, then the tangents' recurrence (math at the top), one GEMM a step.
Tensor lstm_scan_tangent(const LstmDims& d, const Tensor& gi, const Tensor& W, const Tensor& b,
                         const Tensor& h0, const Tensor& c0, const Tangents& t, const Tensor& Y) {
  const int64_t T = d.T, B = d.B, H = d.H;
  if (T == 0) return zeros(Y.shape(), Y.dtype());
  const Tensor hs = reshape(narrow(Y, 0, 0, 1), {T, B, H});  // h_1 .. h_T
  const Tensor cs = reshape(narrow(Y, 0, 1, 1), {T, B, H});  // c_1 .. c_T
  const Tensor h_prev = previous(h0, hs), c_prev = previous(c0, cs);  // (T, B, H)
  Tensor G = add(gi, matmul(h_prev, W, false, true));  // (T, B, 4H)
  if (b.defined()) G = add(G, b);
  const Tensor i = sigmoid(narrow(G, 2, 0, H)), f = sigmoid(narrow(G, 2, H, H)),
               g = tanh(narrow(G, 2, 2 * H, H)), o = sigmoid(narrow(G, 2, 3 * H, H));
  const Tensor slopes = cat({mul(i, sub(1.0, i)), mul(f, sub(1.0, f)), sub(1.0, mul(g, g)),
                             mul(o, sub(1.0, o))}, 2);  // (T, B, 4H): the gates' derivatives
  const Tensor tanh_c = tanh(cs), o_dtanh = mul(o, sub(1.0, mul(tanh_c, tanh_c)));
  // tG's terms outside the recurrence, tGi + h_{t-1} tW^T + tb, every step at once
  const Tensor hp_tW = detail::tangent_term(
      t[1], [&](const Tensor& tW) { return matmul(h_prev, tW, false, true); });
  const Tensor tG_in = detail::or_zeros(
      detail::tangent_sum(detail::tangent_sum(t[0], hp_tW, G.shape()), t[2], G.shape()),
      G.shape(), Y.dtype());
  auto steps = [](const Tensor& x) { return split(x, 1, 0); };  // T x (1, B, .)
  const std::vector<Tensor> tG_in_s = steps(tG_in), slopes_s = steps(slopes), i_s = steps(i),
                            f_s = steps(f), g_s = steps(g), c_prev_s = steps(c_prev),
                            tanh_c_s = steps(tanh_c), o_dtanh_s = steps(o_dtanh);
  const Shape state{1, B, H};
  Tensor th = t[3].defined() ? reshape(t[3], {1, B, H}) : zeros(state, Y.dtype());
  Tensor tc = t[4].defined() ? reshape(t[4], {1, B, H}) : zeros(state, Y.dtype());
  std::vector<Tensor> ths, tcs;
  for (int64_t s = 0; s < T; ++s) {
    const Tensor tA = mul(add(tG_in_s[s], matmul(th, W, false, true)), slopes_s[s]);  // (1, B, 4H)
    const Tensor ti = narrow(tA, 2, 0, H), tf = narrow(tA, 2, H, H),
                 tg = narrow(tA, 2, 2 * H, H), to = narrow(tA, 2, 3 * H, H);
    tc = add(add(mul(tf, c_prev_s[s]), mul(f_s[s], tc)), add(mul(ti, g_s[s]), mul(i_s[s], tg)));
    th = add(mul(to, tanh_c_s[s]), mul(o_dtanh_s[s], tc));
    ths.push_back(th);
    tcs.push_back(tc);
  }
  return stack({cat(ths, 0), cat(tcs, 0)}, 0);  // (2, T, B, H)
}

}  // namespace

Tensor lstm_scan(const Tensor& gi, const Tensor& W, const Tensor& b, const Tensor& h0,
                 const Tensor& c0, const std::source_location& where) {
  const LstmDims d = check_inputs(gi, W, b, h0, c0);
  Tensor Y(Shape{2, d.T, d.B, d.H}, gi.dtype());
  Tensor A(gi.shape(), gi.dtype()), C(Shape{d.T, d.B, d.H}, gi.dtype());
  dispatch(gi.dtype(), [&]<class T>() { forward_kernel<T>(d, gi, W, b, h0, c0, Y, A, C); });
  const bool state_grads = h0.requires_grad() || c0.requires_grad();
  return record("lstm_scan", std::move(Y), {gi, W, b, h0, c0}, where)
      .saves(gi, W, b, h0, c0)
      .formula([d, gi, W, b, h0, c0](const Tensor& dY) -> Grads {
        return lstm_scan_formula(d, gi, W, b, h0, c0, dY);
      })
      .kernel([d, W, b, h0, c0, A, C, state_grads](const Tensor& dY, const Tensor& Y) -> Grads {
        return dispatch(W.dtype(), [&]<class T>() {
          return backward_kernel<T>(d, W, b, h0, c0, Y, A, C, dY, state_grads);
        });
      })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        return lstm_scan_tangent(d, gi, W, b, h0, c0, t, Y);
      });
}

}  // namespace tg
