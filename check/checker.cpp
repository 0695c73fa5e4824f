#include <tapegrad/check/checker.h>

#include <cmath>
#include <sstream>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>

namespace tg {

namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

// Leading (batch / head) entries of a (.., T, T) or (.., T, d) tensor.
int64_t outer(const Tensor& t) { return t.numel() / (t.size(-2) * t.size(-1)); }

InvariantResult check_shapes(const AttentionOutput& o, const Tensor& X) {
  InvariantResult r{"shapes", true, 0, ""};
  const int64_t T = X.size(-2);
  std::string why;
  auto need = [&](bool ok, const std::string& what) {
    if (!ok && why.empty()) why = what;
  };
  for (const Tensor* t : {&o.Q, &o.K, &o.V, &o.A, &o.Y}) need(t->defined() && t->rank() >= 2,
                                                           "Q, K, V, A, Y must all be returned");
  if (why.empty()) {
    need(o.Q.shape() == o.K.shape(), "Q and K differ in shape");
    need(o.Q.size(-2) == T && o.V.size(-2) == T, "Q, K, V need T rows");
    need(o.A.size(-1) == T && o.A.size(-2) == T, "A must be (.., T, T)");
    need(o.Y.size(-2) == T, "Y needs T rows");
    need(o.Y.rank() == X.rank() && (X.rank() == 2 || o.Y.size(0) == X.size(0)),
         "Y must have X's rank and batch axis");
    need(o.A.numel() / (T * T) == o.V.numel() / (T * o.V.size(-1)),
         "A and V must have the same batch and head axes");
  }
  std::string shapes = "X " + X.shape().str();
  const char* names[] = {"Q", "K", "V", "S/A", "Y"};
  int i = 0;
  for (const Tensor* t : {&o.Q, &o.K, &o.V, &o.A, &o.Y}) {
    shapes += std::string(", ") + names[i++] + " " + (t->defined() ? t->shape().str() : "none");
  }
  r.passed = why.empty();
  r.detail = r.passed ? shapes : why + ": " + shapes;
  return r;
}

InvariantResult check_row_sums(const Tensor& A) {
  InvariantResult r{"rows of A sum to 1", true, 0, ""};
  const auto a = A.to_vector();
  const int64_t T = A.size(-1);
  for (std::size_t row = 0; row * T < a.size(); ++row) {
    double s = 0;
    for (int64_t j = 0; j < T; ++j) s += a[row * T + j];
    r.value = std::max(r.value, std::fabs(s - 1.0));
    if (std::isnan(s)) r.value = NAN;
  }
  const double tol = A.dtype() == Dtype::f32 ? 1e-5 : 1e-12;
  r.passed = r.value <= tol;
  r.detail = "max |row sum - 1| = " + fmt(r.value) + " (allowed " + fmt(tol) + ")";
  return r;
}

InvariantResult check_mask(const Tensor& A, int64_t window) {
  InvariantResult r{window ? "weights outside the causal window are 0"
                           : "weights above the diagonal are 0",
                    true, 0, ""};
  const auto a = A.to_vector();
  const int64_t T = A.size(-1);
  int64_t leaks = 0;
  std::string first;
  for (int64_t m = 0; m < outer(A); ++m)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const bool masked = j > i || (window > 0 && j <= i - window);
        const double v = a[(m * T + i) * T + j];
        if (masked && v != 0) {
          if (!leaks++) first = "A[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + fmt(v);
          r.value = std::max(r.value, std::fabs(v));
        }
      }
  r.passed = leaks == 0;
  r.detail = r.passed ? "every masked weight is exactly 0"
                      : std::to_string(leaks) + " masked weights are nonzero, first " + first;
  return r;
}

// Y[.., 0, :] against the position-0 rows of V, heads concatenated in order, times W_O.
InvariantResult check_first_row(const AttentionOutput& o) {
  InvariantResult r{o.W_O.defined() ? "Y[0] == V[0] W_O" : "Y[0] == V[0]", true, 0, ""};
  NoGradGuard no_grad;
  const int64_t T = o.Y.size(-2), d_v = o.Y.size(-1);
  const int64_t batch = o.Y.numel() / (T * d_v);
  const int64_t heads = outer(o.V) / batch, d_h = o.V.size(-1);
  const auto v = o.V.to_vector();
  std::vector<double> v0(batch * heads * d_h);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < d_h; ++c)
        v0[(b * heads + h) * d_h + c] = v[((b * heads + h) * T + 0) * d_h + c];
  Tensor expect = from_vector(v0, Shape{batch, heads * d_h}, o.V.dtype());
  if (o.W_O.defined()) expect = matmul(expect, o.W_O);
  if (expect.size(-1) != d_v) {
    r.passed = false;
    r.detail = "V's heads give " + std::to_string(expect.size(-1)) + " columns, Y has " +
               std::to_string(d_v);
    return r;
  }
  const auto e = expect.to_vector(), y = o.Y.to_vector();
  double scale_ = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < d_v; ++c) {
      r.value = std::max(r.value, std::fabs(y[(b * T) * d_v + c] - e[b * d_v + c]));
      scale_ = std::max(scale_, std::fabs(e[b * d_v + c]));
    }
  const double tol = (o.Y.dtype() == Dtype::f32 ? 1e-5 : 1e-12) * std::max(1.0, scale_);
  r.passed = r.value <= tol;
  r.detail = "max |Y[0] - expected| = " + fmt(r.value) + " (allowed " + fmt(tol) + ")";
  return r;
}

// For each output row i (per batch entry), one backward with random weights on Y[b, i, :]:
// dX must vanish exactly on every row j the mask hides from i, and on every other batch entry.
InvariantResult check_causality(const AttentionFn& f, const Tensor& X,
                                const std::vector<Tensor>& params, int64_t window) {
  InvariantResult r{"causality through autodiff: dY_i/dX_j == 0 for hidden j", true, 0, ""};
  Tensor x = X.detach().set_requires_grad();
  const Tensor Y = f(x, params).Y;
  const int64_t T = X.size(-2), D = X.size(-1), d = Y.size(-1);
  const int64_t batch = X.numel() / (T * D);
  Rng rng(12345);
  int64_t leaks = 0, checked = 0;
  std::string first;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> w(Y.numel(), 0.0);
      for (int64_t c = 0; c < d; ++c) w[(b * T + i) * d + c] = rng.normal();
      const Tensor dX =
          grad({Y}, {x}, {from_vector(w, Y.shape(), Y.dtype())}, false, /*retain_graph=*/true)[0];
      const auto g = dX.to_vector();
      for (int64_t bb = 0; bb < batch; ++bb)
        for (int64_t j = 0; j < T; ++j) {
          const bool hidden = bb != b || j > i || (window > 0 && j <= i - window);
          if (!hidden) continue;
          ++checked;
          for (int64_t c = 0; c < D; ++c) {
            const double v = g[(bb * T + j) * D + c];
            if (v != 0) {
              if (!leaks) first = "batch " + std::to_string(b) + " row " + std::to_string(i) +
                                  " depends on batch " + std::to_string(bb) + " row " +
                                  std::to_string(j) + " (dY/dX = " + fmt(v) + ")";
              ++leaks;
              r.value = std::max(r.value, std::fabs(v));
              break;
            }
          }
        }
    }
  r.passed = leaks == 0;
  r.detail = r.passed ? std::to_string(checked) + " hidden (i, j) pairs, every gradient exactly 0"
                      : std::to_string(leaks) + " of " + std::to_string(checked) +
                            " hidden pairs leak; first: " + first;
  return r;
}

InvariantResult check_gradient(const AttentionFn& f, const Tensor& X,
                               const std::vector<Tensor>& params, std::size_t which,
                               const CheckerOptions& co) {
  const GradcheckOptions& go = co.gradcheck;
  const std::string name = which == 0                                ? "X"
                           : which <= co.parameter_names.size() ? co.parameter_names[which - 1]
                                                                : "parameter " + std::to_string(which - 1);
  InvariantResult r{"gradcheck of dY/d" + name, true, 0, ""};
  std::vector<Tensor> all{X};
  all.insert(all.end(), params.begin(), params.end());
  ScalarFunction g = [&f, all, which](const std::vector<Tensor>& in) {
    std::vector<Tensor> a = all;
    a[which] = in[0];
    for (std::size_t k = 0; k < a.size(); ++k)
      if (k != which) a[k] = a[k].to(in[0].dtype());
    return f(a[0], std::vector<Tensor>(a.begin() + 1, a.end())).Y;
  };
  GradcheckOptions o = go;
  o.warn_vacuous = false;
  const GradcheckResult res = gradcheck(g, {all[which]}, o);
  r.passed = res.passed;  // a zero Jacobian can be right (T = 1 makes Y independent of W_Q)
  r.value = res.max_abs_error;
  r.detail = "max abs error " + fmt(res.max_abs_error) + ", max rel error " +
             fmt(res.max_rel_error) + " over " + std::to_string(res.entries) + " entries" +
             (res.passed ? "" : "; " + res.message) + (res.vacuous ? "; the Jacobian is all zero, so this check proves nothing here" : "");
  return r;
}

}  // namespace

bool InvariantReport::passed() const {
  for (const auto& r : results)
    if (!r.passed) return false;
  return !results.empty();
}

std::string InvariantReport::str() const {
  std::string s;
  for (const auto& r : results)
    s += std::string(r.passed ? "  PASS  " : "  FAIL  ") + r.name + ": " + r.detail + "\n";
  return s;
}

InvariantReport check_attention(const AttentionFn& f, const Tensor& X,
                                const std::vector<Tensor>& params, const CheckerOptions& o) {
  InvariantReport report;
  const AttentionOutput out = [&] {
    NoGradGuard no_grad;
    return f(X, params);
  }();
  report.results.push_back(check_shapes(out, X));
  if (!report.results.back().passed) return report;  // the rest would index out of bounds
  report.results.push_back(check_row_sums(out.A));
  report.results.push_back(check_mask(out.A, o.window));
  report.results.push_back(check_first_row(out));
  report.results.push_back(check_causality(f, X, params, o.window));
  if (o.check_gradients)
    for (std::size_t k = 0; k <= params.size(); ++k)
      report.results.push_back(check_gradient(f, X, params, k, o));
  return report;
}

}  // namespace tg
