// gradcheck's forward-mode half, after torch.autograd.gradcheck's check_forward_ad. For random
// tangents t of the checked inputs and random weights u of the outputs, in one DualLevel:
//
//   J t        by forward mode (one pass, the ops' tangent rules), against central differences
//              (f(x + eps t) - f(x - eps t)) / (2 eps), entry by entry (atol + rtol, as gradcheck),
//              with every checked input's tangent and then with each one's alone (a rule's
//              terms for inputs without a tangent), each both recorded (the inputs require
//              grad: the rules in ops run) and with grad mode off (the tangent kernels run),
//              each run's values against the plain forward's (to 64 ulps of the dtype);
//   <u, J t>   against <J^T u, t>, J^T u by the reverse pass at the same point (the formulas),
//              to 1e-10 relative in float64 (relative to the terms' size, and at least 1): the two
//              modes are one derivative;
//   H_u t      (second_order) the tangent of J^T u, i.e. forward over reverse, against reverse
//              over reverse, grad(<grad(<u, f>, x, create_graph), t>, x), to 1e-9 relative (to
//              the largest entry, and at least 1).

#include <tapegrad/check/gradcheck.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>

namespace tg {

namespace {

using detail::checked_inputs;

double dot(const Tensor& a, const Tensor& b, double* abs_sum = nullptr) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double s = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    s += x[k] * y[k];
    if (abs_sum) *abs_sum += std::fabs(x[k] * y[k]);
  }
  return s;
}

// f at values + step * tangents (the checked inputs moved), its floating outputs flattened.
std::vector<std::vector<double>> eval_at(const Function& f, const std::vector<Tensor>& values,
                                         const std::vector<Tensor>& tangents, double step) {
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Tensor x = values[i].detach().clone();
    if (tangents[i].defined())
      dispatch(x.dtype(), [&]<class T>() {
        T* p = x.data<T>();
        const std::vector<double> t = tangents[i].to_vector();
        for (std::size_t k = 0; k < t.size(); ++k) p[k] += static_cast<T>(step * t[k]);
      });
    xs.push_back(x);
  }
  std::vector<std::vector<double>> out;
  for (const Tensor& y : f(xs)) out.push_back(is_floating(y.dtype()) ? y.to_vector() : std::vector<double>());
  return out;
}

// One J t (a tensor per output of f, undefined for a non-float one), what names it, and the
// outputs' values of the same run (a run with dual inputs; empty when not checked).
struct JtBy {
  std::vector<Tensor> jt;
  std::string what;
  std::vector<Tensor> values;
};

// The values a run with dual inputs computed against the plain f's at the same point, entry by
// entry, to 64 units of the dtype's epsilon (relative above 1): an op that computes its tangent
// with its output in one kernel must leave the output as it was. Returns the message of the
// first entry off, or "".
std::string compare_values(const std::vector<std::vector<double>>& plain, const JtBy& run) {
  for (std::size_t j = 0; j < run.values.size() && j < plain.size(); ++j) {
    if (plain[j].empty()) continue;
    const std::vector<double> a = run.values[j].to_vector();
    const double ulp = run.values[j].dtype() == Dtype::f32 ? 0x1p-23 : 0x1p-52;
    for (std::size_t k = 0; k < a.size(); ++k) {
      const double tol = 64 * ulp * std::max(1.0, std::fabs(plain[j][k]));
      if (a[k] == plain[j][k] || std::fabs(a[k] - plain[j][k]) <= tol) continue;
      if (std::isnan(a[k]) && std::isnan(plain[j][k])) continue;
      std::ostringstream w;
      w.precision(17);
      w << "output " << j << " at " << run.values[j].shape().index_str(static_cast<int64_t>(k))
        << " (" << run.what << "): " << a[k] << " with dual inputs, " << plain[j][k]
        << " from the plain forward";
      return w.str();
    }
  }
  return "";
}

// Each J t of `by` against central differences of f along t (computed once), entry by entry
// (atol + rtol, as gradcheck), into r (the entries counted once), after its run's values
// against the plain f's. Returns the message of the worst failing entry of the first J t that
// fails, or "".
std::string compare_with_differences(const Function& f, const std::vector<Tensor>& values,
                                     const std::vector<Tensor>& t, const std::vector<JtBy>& by,
                                     const GradcheckOptions& o, GradcheckResult& r) {
  const auto plus = eval_at(f, values, t, o.eps), minus = eval_at(f, values, t, -o.eps);
  const auto plain = eval_at(f, values, t, 0.0);
  for (std::size_t c = 0; c < by.size(); ++c) {
    const std::vector<Tensor>& jt = by[c].jt;
    const std::string& what = by[c].what;
    if (std::string bad = compare_values(plain, by[c]); !bad.empty()) return bad;
    double worst = -1;
    std::string message;
    for (std::size_t j = 0; j < jt.size(); ++j) {
      if (!jt[j].defined()) continue;
      const std::vector<double> a = jt[j].to_vector();
      for (std::size_t k = 0; k < a.size(); ++k) {
        const double n = (plus[j][k] - minus[j][k]) / (2 * o.eps);
        const double diff = std::fabs(a[k] - n);
        if (c == 0) ++r.entries;
        r.max_abs_error = std::max(r.max_abs_error, diff);
        if (diff > 0 && std::fabs(n) > o.atol)
          r.max_rel_error = std::max(r.max_rel_error, diff / std::fabs(n));
        const double ratio = diff / (o.atol + o.rtol * std::fabs(n));
        if (ratio <= 1.0 || (worst > ratio && !std::isnan(ratio)) || std::isnan(worst)) continue;
        worst = ratio;
        std::ostringstream w;
        w.precision(10);
        w << "J t of output " << j << " at " << jt[j].shape().index_str(static_cast<int64_t>(k))
          << " (" << what << "): forward mode " << a[k] << ", central differences " << n;
        message = w.str();
        r.output = static_cast<int>(j), r.output_element = static_cast<int64_t>(k);
        r.analytical = a[k], r.numerical = n;
      }
    }
    if (!message.empty()) return message;
  }
  return "";
}

// The values of a dual run's outputs (the primals), undefined for a non-float one.
std::vector<Tensor> primals(const std::vector<Tensor>& outs) {
  std::vector<Tensor> v;
  for (const Tensor& y : outs)
    v.push_back(is_floating(y.dtype()) ? fwad::unpack_dual(y).primal.detach() : Tensor());
  return v;
}

// J t by forward mode, the tangents t on the inputs that have one: `recorded` (grad mode on, the
// checked inputs requiring grad, so every rule runs in ops and records), or with grad mode off
// (a rule that has a tangent kernel runs it, some with the output in one pass); with the
// outputs' values of the run.
JtBy forward_jt(const Function& f, const std::vector<Tensor>& values,
                const std::vector<Tensor>& t, const std::vector<bool>& checked, bool recorded,
                std::string what) {
  const GradModeGuard mode(recorded);
  fwad::DualLevel level;
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Tensor x = values[i];
    if (recorded && checked[i] && x.defined()) x = x.detach().clone().set_requires_grad();
    xs.push_back(t[i].defined() ? fwad::make_dual(x, t[i]) : x);
  }
  const std::vector<Tensor> ys = f(xs);
  JtBy run{{}, std::move(what), primals(ys)};
  for (const Tensor& y : ys) {
    Tensor tan = is_floating(y.dtype()) ? fwad::unpack_dual(y).tangent : Tensor();
    if (!tan.defined() && is_floating(y.dtype())) tan = zeros(y.shape(), y.dtype());
    run.jt.push_back(tan.defined() ? tan.detach() : tan);
  }
  return run;
}

}  // namespace

GradcheckResult check_forward_ad(const Function& f, const std::vector<Tensor>& inputs,
                                 const GradcheckOptions& o, bool second_order) {
  GradcheckResult r;
  // Values (in double unless told), tangents and weights from the seed.
  std::vector<Tensor> values;
  for (const Tensor& x : inputs)
    values.push_back(!x.defined() ? x
                     : o.in_double && x.dtype() == Dtype::f32 ? x.detach().to(Dtype::f64)
                                                              : x.detach());
  const std::vector<bool> checked = checked_inputs(inputs);
  Rng rng(o.seed + 7);
  std::vector<Tensor> t(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    if (checked[i]) t[i] = randn(values[i].shape(), rng, values[i].dtype());

  // Forward mode, the reverse pass and forward over reverse at the same point.
  std::vector<Tensor> leaves, outs, jt, u, Jtu, Hut;
  {
    fwad::DualLevel level;
    std::vector<Tensor> xs;
    for (std::size_t i = 0; i < values.size(); ++i) {
      Tensor x = values[i].defined() ? values[i].detach().clone() : values[i];
      if (checked[i]) x.set_requires_grad();
      leaves.push_back(x);
      xs.push_back(checked[i] ? fwad::make_dual(x, t[i]) : x);
    }
    outs = f(xs);
    std::vector<Tensor> ys, ws;
    for (const Tensor& y : outs) {
      Tensor tan = is_floating(y.dtype()) ? fwad::unpack_dual(y).tangent : Tensor();
      if (!tan.defined() && is_floating(y.dtype())) tan = zeros(y.shape(), y.dtype());
      jt.push_back(tan);
      u.push_back(is_floating(y.dtype()) ? randn(y.shape(), rng, y.dtype()) : Tensor());
      if (y.requires_grad()) ys.push_back(y), ws.push_back(u.back());
    }
    std::vector<Tensor> diff;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (checked[i]) diff.push_back(leaves[i]);
    std::vector<Tensor> g;
    if (!ys.empty()) {
      const detail::FormulasOnly formulas;
      g = grad(ys, diff, ws);
    }
    for (std::size_t i = 0, k = 0; i < leaves.size(); ++i) {
      if (!checked[i]) {
        Jtu.emplace_back(), Hut.emplace_back();
        continue;
      }
      const Tensor gi = g.empty() ? zeros(values[i].shape(), values[i].dtype()) : g[k++];
      const fwad::UnpackedDual p = fwad::unpack_dual(gi);
      Jtu.push_back(p.primal.detach());
      Hut.push_back(p.tangent.defined() ? p.tangent.detach() : zeros(gi.shape(), gi.dtype()));
    }
  }

  // J t against central differences: with every checked input's tangent, then (where there are
  // several) with one input's at a time, so that each rule's zero-tangent paths are seen too;
  // each recorded (the rules in ops) and with grad mode off (the tangent kernels).
  std::ostringstream m;
  m.precision(10);
  std::string bad = compare_with_differences(
      f, values, t,
      {{jt, "every input's tangent", primals(outs)},
       forward_jt(f, values, t, checked, false, "every input's tangent, grad mode off")},
      o, r);
  const int n_checked = static_cast<int>(std::count(checked.begin(), checked.end(), true));
  for (std::size_t i = 0; i < values.size() && n_checked > 1 && bad.empty(); ++i) {
    if (!checked[i]) continue;
    std::vector<Tensor> ti(values.size());
    ti[i] = t[i];
    const std::string alone = "input " + std::to_string(i) + "'s tangent alone";
    bad = compare_with_differences(
        f, values, ti,
        {forward_jt(f, values, ti, checked, true, alone),
         forward_jt(f, values, ti, checked, false, alone + ", grad mode off")},
        o, r);
  }
  if (!bad.empty()) r.passed = false, m << "check_forward_ad failed: " << bad;

  // <u, J t> against <J^T u, t>.
  double fwd_abs = 0, rev_abs = 0, fwd = 0, rev = 0;
  for (std::size_t j = 0; j < outs.size(); ++j)
    if (jt[j].defined()) fwd += dot(u[j], jt[j], &fwd_abs);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (checked[i]) rev += dot(Jtu[i], t[i], &rev_abs);
  const bool f64 = std::all_of(values.begin(), values.end(), [](const Tensor& x) {
    return !x.defined() || !is_floating(x.dtype()) || x.dtype() == Dtype::f64;
  });
  // Relative to the terms' size, and at least to 1 (what u and t are drawn at): a product that
  // is zero (the sum of a softmax) comes out as rounding noise on one side and 0 on the other.
  const double tol = f64 ? 1e-10 : 1e-4;
  if (!(std::fabs(fwd - rev) <= tol * std::max({fwd_abs, rev_abs, 1.0}))) {
    r.passed = false;
    m << (m.tellp() ? "; " : "check_forward_ad failed: ") << "<u, J t> = " << fwd
      << " by forward mode but <J^T u, t> = " << rev << " by the reverse pass";
  }

  // Forward over reverse against reverse over reverse.
  if (second_order) {
    std::vector<Tensor> xs, diff, tw;
    for (std::size_t i = 0; i < values.size(); ++i) {
      Tensor x = values[i].defined() ? values[i].detach().clone() : values[i];
      if (checked[i]) x.set_requires_grad(), diff.push_back(x), tw.push_back(t[i]);
      xs.push_back(x);
    }
    const std::vector<Tensor> ys = f(xs);
    std::vector<Tensor> yr, ws;
    for (std::size_t j = 0; j < ys.size(); ++j)
      if (ys[j].requires_grad()) yr.push_back(ys[j]), ws.push_back(u[j]);
    std::vector<Tensor> hv;
    if (!yr.empty()) {
      const std::vector<Tensor> g = grad(yr, diff, ws, /*create_graph=*/true);
      std::vector<Tensor> gr, gw;
      for (std::size_t k = 0; k < g.size(); ++k)
        if (g[k].requires_grad()) gr.push_back(g[k]), gw.push_back(tw[k]);
      if (!gr.empty()) hv = grad(gr, diff, gw);
    }
    for (std::size_t i = 0, k = 0; i < values.size(); ++i) {
      if (!checked[i]) continue;
      const std::vector<double> a = Hut[i].to_vector();
      const std::vector<double> b = hv.empty() ? std::vector<double>(a.size(), 0.0) : hv[k].to_vector();
      ++k;
      double scale = 1.0;  // (as above: a zero Hessian comes out as rounding noise)
      for (std::size_t e = 0; e < a.size(); ++e) scale = std::max({scale, std::fabs(a[e]), std::fabs(b[e])});
      for (std::size_t e = 0; e < a.size(); ++e)
        if (!(std::fabs(a[e] - b[e]) <= (f64 ? 1e-9 : 1e-3) * scale)) {
          r.passed = false;
          m << (m.tellp() ? "; " : "check_forward_ad failed: ") << "forward over reverse H_u t of input "
            << i << " at " << values[i].shape().index_str(static_cast<int64_t>(e)) << " is " << a[e]
            << ", reverse over reverse " << b[e];
          break;
        }
    }
  }
  r.message = r.passed ? "ok" : m.str();
  return r;
}

}  // namespace tg
