#include <tapegrad/check/gradcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/node.h>

namespace tg {

namespace detail {

std::vector<bool> checked_inputs(const std::vector<Tensor>& inputs) {
  const bool any = std::any_of(inputs.begin(), inputs.end(),
                               [](const Tensor& x) { return x.defined() && x.requires_grad(); });
  std::vector<bool> checked;
  for (const Tensor& x : inputs)
    checked.push_back(x.defined() && is_floating(x.dtype()) && (!any || x.requires_grad()));
  return checked;
}

}  // namespace detail

namespace {

using detail::checked_inputs;

// Fresh leaves holding `values`, so each evaluation builds its own graph; the checked ones
// require grad, the others are passed as they are.
std::vector<Tensor> leaves(const std::vector<Tensor>& values, const std::vector<bool>& checked) {
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Tensor x = values[i].detach().clone();
    if (checked[i]) x.set_requires_grad();
    xs.push_back(x);
  }
  return xs;
}

// All outputs of f at `values`, flattened to one vector of doubles.
std::vector<double> eval_flat(const Function& f, const std::vector<Tensor>& values,
                              const std::vector<bool>& checked) {
  std::vector<double> flat;
  for (const Tensor& y : f(leaves(values, checked))) {
    const auto v = y.to_vector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

// Bitwise equal, so that a NaN gradient counts as reproduced (NaN != NaN as a value).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  // (memcmp may not be given the null data of an empty vector: an input that is not checked.)
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

void set_element(Tensor& t, int64_t k, double v) {
  dispatch(t.dtype(), [&]<class T>() { t.data<T>()[k] = static_cast<T>(v); });
}

// The derivative forms an op may have (the derivative contract): each is checked on its own.
enum class Form { kernels, formulas };
const char* form_name(Form form) {
  return form == Form::kernels ? "kernels (where an op has one)" : "formulas";
}

// Reverse-mode gradients of sum_j <outputs_j, weights_j> with respect to the floating leaves,
// by the ops' kernels where they have one, or by their formulas only; an int64 input gets an
// undefined tensor.
std::vector<Tensor> weighted_grads(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& xs, Form form) {
  std::vector<Tensor> ys, ws, diff;
  for (std::size_t j = 0; j < outputs.size(); ++j)
    if (outputs[j].requires_grad()) {
      ys.push_back(outputs[j]);
      ws.push_back(weights[j]);
    }
  for (const Tensor& x : xs)
    if (x.requires_grad()) diff.push_back(x);
  std::vector<Tensor> g;
  if (!ys.empty() && !diff.empty()) {
    std::optional<detail::FormulasOnly> formulas;
    if (form == Form::formulas) formulas.emplace();
    g = grad(ys, diff, ws, /*create_graph=*/false, /*retain_graph=*/true);
  }
  std::vector<Tensor> out;
  for (std::size_t i = 0, k = 0; i < xs.size(); ++i) {
    if (!xs[i].requires_grad())
      out.emplace_back();
    else
      out.push_back(g.empty() ? zeros(xs[i].shape(), xs[i].dtype()) : g[k++]);
  }
  return out;
}

struct Compare {
  const GradcheckOptions& o;
  GradcheckResult& r;
  double worst_ratio = -1;
  double max_an = 0, max_num = 0;

  void entry(Form form, int input, int64_t element, int output, int64_t out_element, double a,
             double n) {
    ++r.entries;
    const double diff = std::fabs(a - n);
    const double rel = diff / std::max(std::fabs(n), std::numeric_limits<double>::min());
    const double ratio = diff / (o.atol + o.rtol * std::fabs(n));
    max_an = std::max(max_an, std::fabs(a));
    max_num = std::max(max_num, std::fabs(n));
    r.max_abs_error = std::max(r.max_abs_error, diff);
    // Relative error means nothing where the true value is (near) zero: atol judges those.
    if (diff > 0 && std::fabs(n) > o.atol) r.max_rel_error = std::max(r.max_rel_error, rel);
    if (!(ratio <= 1.0)) r.passed = false;  // NaN fails too
    if (ratio > worst_ratio || std::isnan(ratio)) {
      if (std::isnan(worst_ratio)) return;
      worst_ratio = ratio;
      r.form = form_name(form);
      r.input = input;
      r.element = element;
      r.output = output;
      r.output_element = out_element;
      r.analytical = a;
      r.numerical = n;
    }
  }
};

std::string describe(const GradcheckResult& r, const GradcheckOptions& o,
                     const std::vector<Tensor>& xs, const std::vector<Shape>& out_shapes) {
  std::ostringstream m;
  m.precision(10);
  m << (r.passed ? "worst" : "gradcheck failed:") << " input " << r.input;
  if (r.element >= 0) m << " element " << xs[r.input].shape().index_str(r.element);
  m << ", output " << r.output;
  if (r.output_element >= 0) m << " element " << out_shapes[r.output].index_str(r.output_element);
  if (o.fast_mode) m << " (random projection)";
  m << ", by the " << r.form << ": analytical " << r.analytical << " vs numerical "
    << r.numerical;
  m.precision(3);
  m << " (|diff| " << std::fabs(r.analytical - r.numerical) << ", allowed " << o.atol << " + "
    << o.rtol << " * |numerical|)";
  return m.str();
}

// What both modes need: the inputs (in double unless asked otherwise), f's outputs at them, and
// where each output's entries start in the flattened outputs.
struct Setup {
  std::vector<Tensor> values, xs, outputs;
  std::vector<bool> checked;
  std::vector<Shape> out_shapes;
  std::vector<int64_t> out_offset;
  int64_t n_out = 0;

  Setup(const Function& f, const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
    for (const Tensor& x : inputs) {
      if (!x.defined()) throw ValueError("gradcheck: an input is an undefined tensor");
      const bool to_double = o.in_double && is_floating(x.dtype());
      values.push_back(to_double ? x.detach().to(Dtype::f64) : x.detach().clone());
    }
    if (o.eps <= 0) throw ValueError("gradcheck: eps must be positive");
    checked = checked_inputs(inputs);
    xs = leaves(values, checked);
    outputs = f(xs);
    for (const Tensor& y : outputs) {
      if (!y.defined()) throw ValueError("gradcheck: the function returned an undefined tensor");
      out_shapes.push_back(y.shape());
      out_offset.push_back(n_out);
      n_out += y.numel();
    }
  }
  int output_of(int64_t q) const {  // which output the flat output entry q belongs to
    int j = 0;
    while (j + 1 < static_cast<int>(outputs.size()) && out_offset[j + 1] <= q) ++j;
    return j;
  }
  // values with element k of input i moved by `by` (times u[k] when u is given).
  std::vector<Tensor> moved(std::size_t i, int64_t k, double by,
                            const std::vector<double>* u = nullptr) const {
    std::vector<Tensor> v = values;
    v[i] = values[i].clone();
    const std::vector<double> x0 = values[i].to_vector();
    if (u)
      for (int64_t e = 0; e < values[i].numel(); ++e) set_element(v[i], e, x0[e] + by * (*u)[e]);
    else
      set_element(v[i], k, x0[k] + by);
    return v;
  }
};

// The analytical Jacobian by one derivative form, one backward per output element:
// J[i][o * n_i + k] (empty for an int64 input).
std::vector<std::vector<double>> jacobian(const Setup& s, Form form) {
  std::vector<std::vector<double>> J(s.xs.size());
  for (std::size_t i = 0; i < s.xs.size(); ++i)
    if (s.xs[i].requires_grad()) J[i].assign(s.n_out * s.xs[i].numel(), 0.0);
  for (std::size_t j = 0; j < s.outputs.size(); ++j) {
    for (int64_t e = 0; e < s.outputs[j].numel(); ++e) {
      std::vector<Tensor> w;
      for (const Tensor& y : s.outputs) w.push_back(zeros(y.shape(), y.dtype()));
      set_element(w[j], e, 1.0);
      const auto g = weighted_grads(s.outputs, w, s.xs, form);
      const int64_t row = s.out_offset[j] + e;
      for (std::size_t i = 0; i < s.xs.size(); ++i) {
        if (!g[i].defined()) continue;
        const auto gv = g[i].to_vector();
        std::copy(gv.begin(), gv.end(), J[i].begin() + row * s.xs[i].numel());
      }
    }
  }
  return J;
}

// Every entry of every floating input's Jacobian, by each derivative form, against central
// differences (computed once).
void check_full(const Function& f, const Setup& s, const GradcheckOptions& o, Compare& cmp) {
  std::vector<std::vector<std::vector<double>>> Js;
  for (Form form : {Form::kernels, Form::formulas}) {
    Js.push_back(jacobian(s, form));
    if (o.check_determinism) {
      const auto again = jacobian(s, form);
      for (std::size_t i = 0; i < again.size(); ++i)
        if (!same_bits(again[i], Js.back()[i])) cmp.r.deterministic = false;
    }
  }
  for (std::size_t i = 0; i < s.xs.size(); ++i) {
    if (!s.xs[i].requires_grad()) continue;
    const int64_t n_i = s.xs[i].numel();
    for (int64_t k = 0; k < n_i; ++k) {
      const auto fp = eval_flat(f, s.moved(i, k, o.eps), s.checked),
                 fm = eval_flat(f, s.moved(i, k, -o.eps), s.checked);
      for (int64_t q = 0; q < s.n_out; ++q) {
        const double num = (fp[q] - fm[q]) / (2 * o.eps);
        const int j = s.output_of(q);
        for (Form form : {Form::kernels, Form::formulas})
          cmp.entry(form, static_cast<int>(i), k, j, q - s.out_offset[j],
                    Js[static_cast<int>(form)][i][q * n_i + k], num);
      }
    }
  }
}

// v^T J_i u_i per floating input, u and v random normal, by each derivative form.
void check_fast(const Function& f, const Setup& s, const GradcheckOptions& o, Compare& cmp) {
  Rng rng(o.seed);
  std::vector<Tensor> v;
  std::vector<double> vflat;
  for (const Tensor& y : s.outputs) {
    v.push_back(randn(y.shape(), rng, y.dtype()));
    const auto tv = v.back().to_vector();
    vflat.insert(vflat.end(), tv.begin(), tv.end());
  }
  std::vector<std::vector<Tensor>> gs;
  for (Form form : {Form::kernels, Form::formulas}) {
    gs.push_back(weighted_grads(s.outputs, v, s.xs, form));
    if (o.check_determinism) {
      const auto again = weighted_grads(s.outputs, v, s.xs, form);
      for (std::size_t i = 0; i < again.size(); ++i)
        if (again[i].defined() && !same_bits(gs.back()[i].to_vector(), again[i].to_vector()))
          cmp.r.deterministic = false;
    }
  }
  for (std::size_t i = 0; i < s.xs.size(); ++i) {
    if (!s.xs[i].requires_grad()) continue;
    const std::vector<double> u = randn(s.values[i].shape(), rng, s.values[i].dtype()).to_vector();
    const auto fp = eval_flat(f, s.moved(i, 0, o.eps, &u), s.checked);
    const auto fm = eval_flat(f, s.moved(i, 0, -o.eps, &u), s.checked);
    double num = 0;
    for (int64_t q = 0; q < s.n_out; ++q) num += vflat[q] * (fp[q] - fm[q]) / (2 * o.eps);
    for (Form form : {Form::kernels, Form::formulas}) {
      const auto gv = gs[static_cast<int>(form)][i].to_vector();
      double an = 0;
      for (std::size_t k = 0; k < u.size(); ++k) an += gv[k] * u[k];
      cmp.entry(form, static_cast<int>(i), -1, 0, -1, an, num);
    }
  }
}

GradcheckResult check(const Function& f, const std::vector<Tensor>& inputs,
                      const GradcheckOptions& o) {
  GradcheckResult r;
  const Setup s(f, inputs, o);
  Compare cmp{o, r};
  if (o.fast_mode)
    check_fast(f, s, o, cmp);
  else
    check_full(f, s, o, cmp);

  if (!r.deterministic) r.passed = false;
  r.vacuous = cmp.max_an <= o.vacuous_tol && cmp.max_num <= o.vacuous_tol;
  if (r.vacuous) {
    r.warnings.push_back(
        "gradcheck: the analytical and numerical Jacobians are both zero (every entry <= " +
        std::to_string(o.vacuous_tol) +
        "), so this check proves nothing; reduce outputs with random weights, not a plain sum");
    if (o.warn_vacuous) std::cerr << "warning: " << r.warnings.back() << "\n";
  }
  if (r.input < 0) {
    r.message = "ok (nothing to compare)";
  } else if (!r.deterministic) {
    r.message = "gradcheck failed: backward is not deterministic (two runs gave different "
                "gradients)";
  } else {
    r.message = r.passed ? "ok; " + describe(r, o, s.xs, s.out_shapes)
                         : describe(r, o, s.xs, s.out_shapes);
  }
  return r;
}

Function lift(const ScalarFunction& f) {
  return [f](const std::vector<Tensor>& xs) { return std::vector<Tensor>{f(xs)}; };
}

}  // namespace

GradcheckResult gradcheck(const Function& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  GradcheckResult r = check(f, inputs, options);
  r.forward_ad = "not checked: check_forward_ad is off";
  if (!options.check_forward_ad || !r.passed) return r;
  try {
    const GradcheckResult fw = check_forward_ad(f, inputs, options);
    r.forward_ad = fw.message;
    if (!fw.passed) r.passed = false, r.message = fw.message;
  } catch (const GraphError& e) {
    // On by default where every op has a rule: an op without one means forward mode is not
    // checked, not that the reverse check failed.
    if (!std::string(e.what()).starts_with("forward AD: '")) throw;
    r.forward_ad = std::string("not checked: ") + e.what();
  }
  return r;
}

GradcheckResult gradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  return gradcheck(lift(f), inputs, options);
}

GradcheckResult gradgradcheck(const Function& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs)
    if (!x.defined()) throw ValueError("gradgradcheck: an input is an undefined tensor");
  const std::vector<bool> checked = checked_inputs(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const bool to_double = options.in_double && is_floating(x.dtype());
    xs.push_back(to_double ? x.detach().to(Dtype::f64) : x.detach().clone());
    if (checked[i]) xs.back().set_requires_grad();  // so that check() checks the same inputs
  }
  // Random grad_outputs, one per output of f, become extra inputs of the checked function.
  Rng rng(options.seed + 0x9e3779b97f4a7c15ull);
  const std::size_t n = xs.size();
  std::vector<Tensor> all = xs;
  for (const Tensor& y : f(leaves(xs, checked)))
    all.push_back(is_floating(y.dtype()) ? randn(y.shape(), rng, y.dtype()).set_requires_grad()
                                         : y.detach().clone());
  // g returns the gradient of each floating input (int64 and bool inputs have none).
  Function g = [f, n](const std::vector<Tensor>& args) {
    std::vector<Tensor> x(args.begin(), args.begin() + n), v(args.begin() + n, args.end());
    const std::vector<Tensor> ys = f(x);
    std::vector<Tensor> ry, rv, xd;
    for (std::size_t j = 0; j < ys.size(); ++j)
      if (ys[j].requires_grad()) {
        ry.push_back(ys[j]);
        rv.push_back(v[j]);
      }
    for (const Tensor& t : x)
      if (t.requires_grad()) xd.push_back(t);
    if (ry.empty()) {
      std::vector<Tensor> z;
      for (const Tensor& t : xd) z.push_back(zeros(t.shape(), t.dtype()));
      return z;
    }
    return grad(ry, xd, rv, /*create_graph=*/true);
  };
  return check(g, all, options);
}

GradcheckResult gradgradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  return gradgradcheck(lift(f), inputs, options);
}

}  // namespace tg
