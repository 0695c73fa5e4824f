#include <tapegrad/check/gradcheck.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>

namespace tg {

namespace {

std::string index_str(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  std::string r = "(";
  for (int d = 0; d < s.rank(); ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + (s.rank() == 1 ? ",)" : ")");
}

// Fresh leaves holding `values`, so each evaluation builds its own graph.
std::vector<Tensor> leaves(const std::vector<Tensor>& values) {
  std::vector<Tensor> xs;
  for (const Tensor& v : values) xs.push_back(v.clone().set_requires_grad());
  return xs;
}

// All outputs of f at `values`, flattened to one vector of doubles.
std::vector<double> eval_flat(const Function& f, const std::vector<Tensor>& values) {
  std::vector<double> flat;
  for (const Tensor& y : f(leaves(values))) {
    const auto v = y.to_vector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

// Bitwise equal, so that a NaN gradient counts as reproduced (NaN != NaN as a value).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

void set_element(Tensor& t, int64_t k, double v) {
  dispatch(t.dtype(), [&]<class T>() { t.data<T>()[k] = static_cast<T>(v); });
}

// Reverse-mode gradients of sum_j <outputs_j, weights_j> with respect to the leaves.
std::vector<Tensor> weighted_grads(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& xs) {
  std::vector<Tensor> ys, ws;
  for (std::size_t j = 0; j < outputs.size(); ++j)
    if (outputs[j].requires_grad()) {
      ys.push_back(outputs[j]);
      ws.push_back(weights[j]);
    }
  if (ys.empty()) {
    std::vector<Tensor> z;
    for (const Tensor& x : xs) z.push_back(zeros(x.shape(), x.dtype()));
    return z;
  }
  return grad(ys, xs, ws, /*create_graph=*/false, /*retain_graph=*/true);
}

struct Compare {
  const GradcheckOptions& o;
  GradcheckResult& r;
  double worst_ratio = -1;
  double max_an = 0, max_num = 0;

  void entry(int input, int64_t element, int output, int64_t out_element, double a, double n) {
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
  if (r.element >= 0) m << " element " << index_str(r.element, xs[r.input].shape());
  m << ", output " << r.output;
  if (r.output_element >= 0) m << " element " << index_str(r.output_element, out_shapes[r.output]);
  if (o.fast_mode) m << " (random projection)";
  m << ": analytical " << r.analytical << " vs numerical " << r.numerical;
  m.precision(3);
  m << " (|diff| " << std::fabs(r.analytical - r.numerical) << ", allowed " << o.atol << " + "
    << o.rtol << " * |numerical|)";
  return m.str();
}

GradcheckResult check(const Function& f, const std::vector<Tensor>& inputs,
                      const GradcheckOptions& o) {
  GradcheckResult r;
  std::vector<Tensor> values;
  for (const Tensor& x : inputs) {
    if (!x.defined()) throw ValueError("gradcheck: an input is an undefined tensor");
    values.push_back(o.in_double ? x.to(Dtype::f64) : x.clone());
  }
  if (o.eps <= 0) throw ValueError("gradcheck: eps must be positive");

  const std::vector<Tensor> xs = leaves(values);
  const std::vector<Tensor> outputs = f(xs);
  std::vector<Shape> out_shapes;
  std::vector<int64_t> out_offset;
  int64_t n_out = 0;
  for (const Tensor& y : outputs) {
    if (!y.defined()) throw ValueError("gradcheck: the function returned an undefined tensor");
    out_shapes.push_back(y.shape());
    out_offset.push_back(n_out);
    n_out += y.numel();
  }
  Compare cmp{o, r};
  Rng rng(o.seed);

  if (!o.fast_mode) {
    // Analytical Jacobian, one row per output element: J[i][o * n_i + k].
    auto analytical = [&]() {
      std::vector<std::vector<double>> J(xs.size());
      for (std::size_t i = 0; i < xs.size(); ++i) J[i].assign(n_out * xs[i].numel(), 0.0);
      for (std::size_t j = 0; j < outputs.size(); ++j) {
        for (int64_t e = 0; e < outputs[j].numel(); ++e) {
          std::vector<Tensor> w;
          for (std::size_t q = 0; q < outputs.size(); ++q)
            w.push_back(zeros(outputs[q].shape(), outputs[q].dtype()));
          set_element(w[j], e, 1.0);
          const auto g = weighted_grads(outputs, w, xs);
          const int64_t row = out_offset[j] + e;
          for (std::size_t i = 0; i < xs.size(); ++i) {
            const auto gv = g[i].to_vector();
            std::copy(gv.begin(), gv.end(), J[i].begin() + row * xs[i].numel());
          }
        }
      }
      return J;
    };
    const auto Ja = analytical();
    if (o.check_determinism) {
      const auto again = analytical();
      for (std::size_t i = 0; i < Ja.size(); ++i)
        if (!same_bits(again[i], Ja[i])) r.deterministic = false;
    }
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const int64_t n_i = xs[i].numel();
      for (int64_t k = 0; k < n_i; ++k) {
        std::vector<Tensor> plus = values, minus = values;
        plus[i] = values[i].clone();
        minus[i] = values[i].clone();
        const double x0 = values[i].to_vector()[k];
        set_element(plus[i], k, x0 + o.eps);
        set_element(minus[i], k, x0 - o.eps);
        const auto fp = eval_flat(f, plus), fm = eval_flat(f, minus);
        for (int64_t q = 0; q < n_out; ++q) {
          const double num = (fp[q] - fm[q]) / (2 * o.eps);
          int j = 0;
          while (j + 1 < static_cast<int>(outputs.size()) && out_offset[j + 1] <= q) ++j;
          cmp.entry(static_cast<int>(i), k, j, q - out_offset[j], Ja[i][q * n_i + k], num);
        }
      }
    }
  } else {
    // v^T J_i u_i per input, u and v random normal.
    std::vector<Tensor> v;
    for (const Tensor& y : outputs) v.push_back(randn(y.shape(), rng, y.dtype()));
    const auto g = weighted_grads(outputs, v, xs);
    if (o.check_determinism) {
      const auto g2 = weighted_grads(outputs, v, xs);
      for (std::size_t i = 0; i < xs.size(); ++i)
        if (!same_bits(g[i].to_vector(), g2[i].to_vector())) r.deterministic = false;
    }
    std::vector<double> vflat;
    for (const Tensor& t : v) {
      const auto tv = t.to_vector();
      vflat.insert(vflat.end(), tv.begin(), tv.end());
    }
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const Tensor u = randn(values[i].shape(), rng, values[i].dtype());
      const auto uv = u.to_vector(), gv = g[i].to_vector(), x0 = values[i].to_vector();
      std::vector<Tensor> plus = values, minus = values;
      plus[i] = values[i].clone();
      minus[i] = values[i].clone();
      for (int64_t k = 0; k < values[i].numel(); ++k) {
        set_element(plus[i], k, x0[k] + o.eps * uv[k]);
        set_element(minus[i], k, x0[k] - o.eps * uv[k]);
      }
      const auto fp = eval_flat(f, plus), fm = eval_flat(f, minus);
      double num = 0, an = 0;
      for (int64_t q = 0; q < n_out; ++q) num += vflat[q] * (fp[q] - fm[q]) / (2 * o.eps);
      for (std::size_t k = 0; k < uv.size(); ++k) an += gv[k] * uv[k];
      cmp.entry(static_cast<int>(i), -1, 0, -1, an, num);
    }
  }

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
    r.message = r.passed ? "ok; " + describe(r, o, xs, out_shapes) : describe(r, o, xs, out_shapes);
  }
  return r;
}

Function lift(const ScalarFunction& f) {
  return [f](const std::vector<Tensor>& xs) { return std::vector<Tensor>{f(xs)}; };
}

}  // namespace

GradcheckResult gradcheck(const Function& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  return check(f, inputs, options);
}

GradcheckResult gradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  return check(lift(f), inputs, options);
}

GradcheckResult gradgradcheck(const Function& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs) {
    if (!x.defined()) throw ValueError("gradgradcheck: an input is an undefined tensor");
    xs.push_back(options.in_double ? x.to(Dtype::f64) : x.clone());
  }
  // Random grad_outputs, one per output of f, become extra inputs of the checked function.
  Rng rng(options.seed + 0x9e3779b97f4a7c15ull);
  const std::size_t n = xs.size();
  std::vector<Tensor> all = xs;
  for (const Tensor& y : f(leaves(xs))) all.push_back(randn(y.shape(), rng, y.dtype()));
  Function g = [f, n](const std::vector<Tensor>& args) {
    std::vector<Tensor> x(args.begin(), args.begin() + n), v(args.begin() + n, args.end());
    const std::vector<Tensor> ys = f(x);
    std::vector<Tensor> ry, rv;
    for (std::size_t j = 0; j < ys.size(); ++j)
      if (ys[j].requires_grad()) {
        ry.push_back(ys[j]);
        rv.push_back(v[j]);
      }
    if (ry.empty()) {
      std::vector<Tensor> z;
      for (const Tensor& t : x) z.push_back(zeros(t.shape(), t.dtype()));
      return z;
    }
    return grad(ry, x, rv, /*create_graph=*/true);
  };
  return check(g, all, options);
}

GradcheckResult gradgradcheck(const ScalarFunction& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  return gradgradcheck(lift(f), inputs, options);
}

}  // namespace tg
