// `tapegrad demo`, part two: the lesson's self-test (b) to (e), then multi-head, batched
// attention with RoPE and W_O through the invariant checker.

#include <cmath>
#include <cstdio>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/ops/ops.h>
#include "tools/demo.h"
#include "tools/demo_util.h"
#include "tools/heatmap.h"

namespace tg::demo {

namespace {

constexpr int64_t kT = 8;

// (b): for each row of A, the positions j with A[i, j] > 0.1.
void strong_weights(std::ostream& out, const Tensor& A, bool& ok) {
  heading(out, "Self-test (b): which positions get weight above 0.1?");
  for (int64_t i = 0; i < kT; ++i) {
    std::string js;
    int n = 0;
    for (int64_t j = 0; j < kT; ++j)
      if (A.at({i, j}) > 0.1) {
        js += (n++ ? ", " : "") + std::to_string(j);
      }
    out << "  row " << i << ": j in {" << js << "}  (" << n << " of the " << i + 1
        << " visible)\n";
    ok = ok && n <= i + 1;
  }
  out << "  Row 0 sees only itself, so it has exactly 1 such index; row 7 sees 8 positions, but\n"
         "  at most 9 weights can exceed 0.1 in a row summing to 1, so the mask's bound of 8 is\n"
         "  the one that binds.\n";
}

// (c): a sliding window of width 3.
void sliding_window(std::ostream& out, const Tensor& X, const std::vector<Tensor>& W, bool& ok) {
  heading(out, "Self-test (c): a sliding-window mask of width w = 3");
  AttentionOptions o;
  o.window = 3;
  o.need_weights = true;
  const AttentionOutput att = single_head_attention(X, W[0], W[1], W[2], Tensor(), o);
  show(out, "causal_mask(8, window 3)", causal_mask(kT, Dtype::f64, 3), 0);
  out << heatmap(att.A);
  const AttentionFn fn = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return single_head_attention(x, p[0], p[1], p[2], Tensor(), o);
  };
  CheckerOptions co;
  co.window = 3;
  co.check_gradients = false;
  const InvariantReport r = check_attention(fn, X, W, co);
  out << r.str();
  verdict(out, r.passed(), "only the band i - 3 < j <= i has nonzero weights", ok);
}

// (d): scaled against unscaled scores as d_k grows.
void unscaled_scores(std::ostream& out, bool& ok) {
  heading(out, "Self-test (d): drop the 1/sqrt(d_k) scale and let d_k grow");
  out << "  X ~ N(0, 1), W_Q, W_K ~ N(0, 1/d_k), so Q and K entries are about N(0, 1) and a\n"
         "  raw score q.k has standard deviation sqrt(d_k). Over rows 1..7 of A (row 0 is always\n"
         "  [1, 0, ...]): the mean of each row's largest weight, the smallest visible weight, and\n"
         "  |dA/dS|, the root-mean-square norm of each row's softmax Jacobian, taken from the\n"
         "  tape (one backward per entry of A): how much gradient the softmax lets through.\n\n"
         "    d_k |  scaled: max A    min A   |dA/dS| | unscaled: max A    min A   |dA/dS|\n";
  double pass_scaled = 0, pass_unscaled = 0;
  for (int64_t d_k : {4, 16, 64, 256}) {
    Rng rng(static_cast<uint64_t>(d_k));
    const Tensor X = randn({kT, d_k}, rng, Dtype::f64);
    const double sd = 1.0 / std::sqrt(double(d_k));
    std::vector<Tensor> W;  // W_Q (requiring grad, so that S is on the tape) and W_K
    for (int k = 0; k < 2; ++k) W.push_back(randn({d_k, d_k}, rng, Dtype::f64, sd));
    W[0].set_requires_grad();
    char line[160];
    std::snprintf(line, sizeof line, "    %3lld |", static_cast<long long>(d_k));
    out << line;
    for (bool scaled : {true, false}) {
      // The model's own scores and weights (W_K stands in for W_V: Y is not looked at).
      const AttentionOutput att = single_head_attention(
          X, W[0], W[1], W[1], Tensor(), {.scale = scaled, .need_weights = true});
      const Tensor& S = att.S;  // (T, T)
      const Tensor& A = att.A;  // (T, T)
      double jacobian = 0;  // sum over rows i >= 1 of |dA_i / dS_i|_F^2
      for (int64_t k = kT; k < kT * kT; ++k) {
        Tensor e = zeros({kT, kT}, Dtype::f64);
        e.data<double>()[k] = 1;
        jacobian += sum_of_squares(grad({A}, {S}, {e}, false, /*retain_graph=*/true)[0]).item();
      }
      const double pass = std::sqrt(jacobian / (kT - 1));
      double mean_max = 0, mn = 1;
      for (int64_t i = 1; i < kT; ++i) {
        double mx = 0;
        for (int64_t j = 0; j <= i; ++j) {
          mx = std::max(mx, A.at({i, j}));
          mn = std::min(mn, A.at({i, j}));
        }
        mean_max += mx / (kT - 1);
      }
      std::snprintf(line, sizeof line, "          %.4f  %.1e  %.1e |", mean_max, mn, pass);
      out << line;
      (scaled ? pass_scaled : pass_unscaled) = pass;
    }
    out << "\n";
  }
  out << "\n  Unscaled, the rows of A go one-hot as d_k grows (max A -> 1, min A -> 0): softmax\n"
         "  saturates, and its backward dS = A * (dA - sum(dA * A)) lets almost no gradient\n"
         "  through to the scores, so W_Q and W_K stop learning. Scaled by 1/sqrt(d_k), the\n"
         "  scores stay about N(0, 1) at every d_k and the gradient keeps flowing.\n";
  verdict(out, pass_unscaled < pass_scaled,
          "at d_k = 256 the unscaled softmax passes less gradient than the scaled one", ok);
}

// (e): the backward of Y = A V with respect to V, three ways.
void backward_wrt_v(std::ostream& out, const AttentionOutput& att, bool& ok) {
  heading(out, "Self-test (e): the backward of Y = A V with respect to V");
  out << "  With L = 0.5 * sum(Y^2), dL/dY = Y, and Y_ic = sum_j A_ij V_jc gives\n"
         "  dL/dV_jc = sum_i A_ij dY_ic, that is dV = A^T dY (numerator layout: (T, T)^T (T, d_v)).\n";
  const Tensor A = att.A.detach();
  Tensor V = att.V.detach().set_requires_grad();
  const Tensor Y = matmul(A, V);
  attention_loss(Y).backward();
  Tensor by_hand;
  {
    NoGradGuard no_grad;
    by_hand = matmul(A, Y, true, false);  // A^T dY with dY = Y
  }
  double diff_tape = 0, diff_fd = 0;
  const double eps = 1e-6;
  for (int64_t k = 0; k < V.numel(); ++k) {
    NoGradGuard no_grad;
    Tensor vp = V.clone(), vm = V.clone();
    vp.data<double>()[k] += eps;
    vm.data<double>()[k] -= eps;
    const double fd = (attention_loss(matmul(A, vp)).item() - attention_loss(matmul(A, vm)).item()) /
                      (2 * eps);
    diff_fd = std::max(diff_fd, std::fabs(fd - by_hand.to_vector()[k]));
    diff_tape = std::max(diff_tape, std::fabs(V.grad().to_vector()[k] - by_hand.to_vector()[k]));
  }
  show(out, "dV = A^T dY, by hand", by_hand);
  out << "  max |A^T dY - finite differences| = " << sci(diff_fd, 2) << "\n"
      << "  max |A^T dY - the tape's dL/dV|    = " << sci(diff_tape, 2) << "\n";
  verdict(out, diff_fd < 1e-7 && diff_tape < 1e-12,
          "the hand-derived backward matches both finite differences and the tape", ok);
}

// Section 11: multi-head, batched, with RoPE and W_O.
void multi_head(std::ostream& out, bool& ok) {
  heading(out, "11. Multi-head, batched, with RoPE and W_O: B = 2, T = 8, D = 8, H = 2");
  Rng rng(1);
  AttentionOptions o;
  o.heads = 2;
  o.rope = true;
  o.need_weights = true;  // the section shows A's shape
  const nn::QKVAttention layer(8, 8, 8, o, /*output_proj=*/true, rng, Dtype::f64);
  const Tensor X = randn({2, kT, 8}, rng, Dtype::f64);
  const AttentionOutput att = layer.forward(X);
  out << "  X " << X.shape().str() << " -> Q, K, V per head " << att.Q.shape().str()
      << " -> A " << att.A.shape().str() << " -> Y " << att.Y.shape().str() << "\n"
      << "  Each head takes 4 columns of Q, K and V (nanoGPT's layout); RoPE rotates each pair\n"
      << "  (2i, 2i+1) of a head vector at position m by m * 10000^(-2i/4) before the scores.\n";
  for (int64_t h = 0; h < 2; ++h) {
    out << "  batch 0, head " << h << ":\n";
    const std::vector<double> all = att.A.to_vector();  // (B, H, T, T), batch 0 first
    const std::vector<double> rows(all.begin() + h * kT * kT, all.begin() + (h + 1) * kT * kT);
    out << heatmap(from_vector(rows, Shape{kT, kT}, Dtype::f64));
  }
  const AttentionFn fn = [o](const Tensor& x, const std::vector<Tensor>& p) {
    return multi_head_attention(x, p[0], p[1], p[2], p[3], o);
  };
  CheckerOptions names;
  names.parameter_names = {"W_Q", "W_K", "W_V", "W_O"};
  const InvariantReport r = check_attention(fn, X, layer.parameters(), names);
  out << r.str();
  verdict(out, r.passed(), "every invariant holds for the multi-head model too", ok);
}

}  // namespace

bool self_test(std::ostream& out) {
  bool ok = true;
  Rng rng(0);
  const Tensor X = randn({kT, 4}, rng, Dtype::f64);
  std::vector<Tensor> W;
  for (int k = 0; k < 3; ++k) W.push_back(randn({4, 4}, rng, Dtype::f64, 0.1));
  const AttentionOutput att = single_head_attention(X, W[0], W[1], W[2], Tensor(), {.need_weights = true});
  strong_weights(out, att.A, ok);
  sliding_window(out, X, W, ok);
  unscaled_scores(out, ok);
  backward_wrt_v(out, att, ok);
  multi_head(out, ok);
  return ok;
}

}  // namespace tg::demo
