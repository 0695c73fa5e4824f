// `tapegrad demo`, part one: the lesson's sections 2 to 10 on its own example, T = 8, d_k = 4.

#include "tools/demo.h"

#include <cmath>
#include <cstdio>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/ops/ops.h>
#include "tools/demo_util.h"
#include "tools/heatmap.h"

namespace tg {

namespace {

constexpr int64_t kT = 8, kD = 4;
// The lesson looks at the weights, so its attention keeps them (the composed ops).
const AttentionOptions kLesson{.need_weights = true};

char num[128];
const char* f6(double v) {
  std::snprintf(num, sizeof num, "%.6f", v);
  return num;
}

}  // namespace

int run_demo(std::ostream& out) {
  using demo::heading, demo::show, demo::verdict;
  bool ok = true;
  out << "tapegrad demo: hand-written causal self-attention, checked by the tape\n"
         "(the lesson 'Implementation day: hand-write self-attention', on its own example)\n";

  heading(out, "2. Setup: T = 8 positions, d_k = d_v = 4, one head, seed 0");
  Rng rng(0);
  const Tensor X = randn({kT, kD}, rng, Dtype::f64);                       // (T, d_k)
  Tensor W_Q = randn({kD, kD}, rng, Dtype::f64, 0.1).set_requires_grad();  // (d_k, d_k)
  Tensor W_K = randn({kD, kD}, rng, Dtype::f64, 0.1).set_requires_grad();  // (d_k, d_k)
  Tensor W_V = randn({kD, kD}, rng, Dtype::f64, 0.1).set_requires_grad();  // (d_k, d_v)
  show(out, "X", X);
  out << "  W_Q, W_K, W_V  shape (4, 4) each, N(0, 0.1^2) entries (a stand-in for Xavier)\n";

  heading(out, "3. Q = X W_Q, K = X W_K, V = X W_V");
  const AttentionOutput att = single_head_attention(X, W_Q, W_K, W_V, Tensor(), kLesson);
  out << "  Q " << att.Q.shape().str() << "   K " << att.K.shape().str() << "   V "
      << att.V.shape().str() << "\n";

  heading(out, "4. Scores S = Q K^T / sqrt(d_k)");
  show(out, "S (first 3 rows; mixed signs, magnitudes around 0.1)", att.S, 4, 3);  // (T, T)

  heading(out, "5. The causal mask: 0 where j <= i, -inf above the diagonal");
  const Tensor M = causal_mask(kT);
  show(out, "M", M, 0);
  out << "  tapegrad masks with -inf, not -1e9: softmax then gives exactly 0 above the diagonal.\n";

  heading(out, "6. A = softmax(S + M), row by row (stable: the row max is subtracted first)");
  show(out, "A", att.A, 4);
  out << "  A as a heatmap (row i = query position, column j = key position):\n";
  out << heatmap(att.A);
  const Tensor row_sums = sum(att.A.detach(), -1);
  show(out, "row sums of A", reshape(row_sums, {1, kT}), 12);
  double upper = 0;
  for (int64_t i = 0; i < kT; ++i)
    for (int64_t j = i + 1; j < kT; ++j) upper = std::max(upper, std::fabs(att.A.at({i, j})));
  out << "  largest |A[i, j]| above the diagonal: " << upper << "\n";

  heading(out, "7. Y = A V: each row a convex mix of the value rows it may see");
  show(out, "Y", att.Y);

  heading(out, "9. The four sanity checks (and two more), by the attention-invariant checker");
  const AttentionFn fn = [](const Tensor& x, const std::vector<Tensor>& p) {
    return single_head_attention(x, p[0], p[1], p[2], Tensor(), kLesson);
  };
  CheckerOptions names;
  names.parameter_names = {"W_Q", "W_K", "W_V"};
  const InvariantReport report = check_attention(fn, X, {W_Q, W_K, W_V}, names);
  out << report.str();
  verdict(out, report.passed(), "all invariants hold", ok);

  heading(out, "10. The gradient of L = 0.5 * sum(Y^2): numerical against analytical");
  const Tensor L = attention_loss(att.Y);
  L.backward();
  const double analytical = W_Q.grad().at({0, 0});
  auto loss_at = [&](double dw) {
    NoGradGuard no_grad;
    Tensor w = W_Q.clone();
    w.data<double>()[0] += dw;
    return attention_loss(single_head_attention(X, w, W_K, W_V).Y).item();
  };
  const double eps = 1e-6;
  const double numerical = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  out << "  L = " << f6(L.item()) << "\n";
  out << "  numerical  dL/dW_Q[0,0] = (L(W_Q[0,0] + 1e-6) - L(W_Q[0,0] - 1e-6)) / 2e-6 = "
      << f6(numerical) << "\n";
  out << "  analytical dL/dW_Q[0,0] from the tape's backward pass              = "
      << f6(analytical) << "\n";
  std::snprintf(num, sizeof num, "%.2e", std::fabs(numerical - analytical));
  verdict(out, std::fabs(numerical - analytical) <= 1e-5 + 1e-3 * std::fabs(numerical),
          std::string("they agree (|difference| ") + num + ")", ok);
  const auto gc = gradcheck(
      [](const std::vector<Tensor>& in) {
        return attention_loss(single_head_attention(in[0], in[1], in[2], in[3]).Y);
      },
      {X, W_Q, W_K, W_V});
  std::snprintf(num, sizeof num, "%.2e", gc.max_abs_error);
  verdict(out, gc.passed,
          "full gradcheck of L over X, W_Q, W_K, W_V: " + std::to_string(gc.entries) +
              " entries, max |analytical - numerical| " + num,
          ok);

  ok = demo::self_test(out) && ok;
  out << "\n" << (ok ? "Every check passed." : "SOME CHECKS FAILED.") << "\n";
  return ok ? 0 : 1;
}

}  // namespace tg
