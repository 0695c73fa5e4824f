// The functional API (functional.h): each function prepares fresh inputs, calls f, then asks the
// engine for gradients that may be missing (PyTorch's allow_unused), and fills in zeros or, with
// strict, refuses. The steps are PyTorch's (_grad_preprocess, _autograd_grad, _fill_in_zeros,
// _grad_postprocess in torch/autograd/functional.py), so the same functions give the same
// results and the same independence errors.

#include <tapegrad/check/functional.h>

#include <string>

#include <tapegrad/check/functional_detail.h>
#include <utility>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/stack.h>

namespace tg {
namespace functional_detail {

std::string nth(const char* what, std::size_t i) { return std::string(what) + " " + std::to_string(i); }

void check_float(const Tensor& t, const std::string& who, const std::string& what) {
  if (!t.defined()) throw ValueError(who + ": " + what + " is an undefined tensor");
  if (!is_floating(t.dtype()))
    throw ValueError(who + ": " + what + " of shape " + t.shape().str() + " is " +
                     dtype_name(t.dtype()) + "; the functional API differentiates float32 and "
                     "float64 tensors");
}

// The inputs f sees: a copy on the tape of an input that requires grad when the caller wants a
// graph back to it (PyTorch's view_as), else the input detached, as a leaf that requires grad.
std::vector<Tensor> fresh_inputs(const std::vector<Tensor>& xs, bool create_graph,
                                 const std::string& who) {
  if (xs.empty()) throw ValueError(who + ": no inputs");
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    check_float(xs[i], who, nth("input", i));
    in.push_back(create_graph && xs[i].requires_grad() ? xs[i].clone()
                                                       : xs[i].detach().set_requires_grad());
  }
  return in;
}

// f's outputs (grad mode is on: every entry point turns it on); at least one, each a float tensor (with strict, each
// requiring grad).
std::vector<Tensor> call(const Function& f, const std::vector<Tensor>& in, bool strict,
                         const std::string& who) {
  const std::vector<Tensor> out = f(in);
  if (out.empty())
    throw ValueError(who + ": the function returned no outputs; it must return at least one tensor");
  for (std::size_t i = 0; i < out.size(); ++i) {
    check_float(out[i], who, nth("output", i) + " of the function");
    if (strict && !out[i].requires_grad())
      throw GraphError(who + ": output " + std::to_string(i) + " of shape " + out[i].shape().str() +
                       " does not require grad (no input reaches it); strict mode needs every "
                       "output computed from the inputs");
  }
  return out;
}

// The vectors v of vjp (one per output) or of vhp / hvp (one per input), checked against what
// they pair with; detached unless create_graph keeps their graph. Empty is allowed only for one
// reference of one element (v = 1 then).
std::vector<Tensor> checked_v(const std::vector<Tensor>& v, const std::vector<Tensor>& refs,
                              const char* ref_name, bool create_graph, const std::string& who) {
  if (v.empty() || (v.size() == 1 && !v[0].defined())) {
    if (refs.size() != 1 || refs[0].numel() != 1)
      throw ValueError(who + ": v may be left out only for a single " + ref_name +
                       " of one element; " + std::to_string(refs.size()) + " " + ref_name +
                       "(s), the first of shape " + refs[0].shape().str());
    return {};
  }
  if (v.size() != refs.size())
    throw ValueError(who + ": " + std::to_string(v.size()) + " vectors v for " +
                     std::to_string(refs.size()) + " " + ref_name + "(s)");
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    check_float(v[i], who, nth("v", i));
    if (v[i].shape() != refs[i].shape())
      throw ShapeError(who + ": v " + std::to_string(i) + " of shape " + v[i].shape().str() +
                       " does not match " + ref_name + " " + std::to_string(i) + " of shape " +
                       refs[i].shape().str());
    if (v[i].dtype() != refs[i].dtype())
      throw ValueError(who + ": v " + std::to_string(i) + " is " + dtype_name(v[i].dtype()) +
                       " but " + ref_name + " " + std::to_string(i) + " is " +
                       dtype_name(refs[i].dtype()));
    out.push_back(create_graph && v[i].requires_grad() ? v[i] : v[i].detach());
  }
  return out;
}

// Gradients of the outputs that require grad (weighted by grad_outputs, when given) with
// respect to inputs; undefined for an input none of them reaches (PyTorch's _autograd_grad).
std::vector<Tensor> grads_or_none(const std::vector<Tensor>& outputs,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& grad_outputs, bool create_graph,
                                  bool retain_graph) {
  std::vector<Tensor> ys, gs;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !outputs[i].requires_grad()) continue;
    ys.push_back(outputs[i]);
    if (!grad_outputs.empty()) gs.push_back(grad_outputs[i]);
  }
  if (ys.empty()) return std::vector<Tensor>(inputs.size());
  return detail::run_backward({.outputs = ys, .grad_outputs = gs, .inputs = &inputs,
                               .retain_graph = retain_graph, .create_graph = create_graph,
                               .where = std::source_location::current(),
                               .zeros_for_unused = false});
}

// Which backward a missing gradient came from, for the strict errors (PyTorch's stages).
enum class Stage { back, double_back, double_back_trick };

// Zeros for the missing gradients, or with strict an error; with strict and create_graph also
// an error for a gradient that does not depend on the inputs (PyTorch's _fill_in_zeros).
std::vector<Tensor> fill_in_zeros(std::vector<Tensor> grads, const std::vector<Tensor>& refs,
                                  const FunctionalOptions& options, Stage stage,
                                  const std::string& who) {
  const char* independent = stage == Stage::back ? "the function's outputs do not depend on "
                            : stage == Stage::double_back
                                ? "the function's gradient does not depend on "
                                : "the double-backward trick's product does not depend on its "
                                  "vector for ";
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const std::string input = nth("input", i) + " of shape " + refs[i].shape().str();
    if (!grads[i].defined()) {
      if (options.strict) throw GraphError(who + ": " + independent + input + " (strict mode)");
      grads[i] = zeros_like(refs[i]);
    } else if (options.strict && options.create_graph && !grads[i].requires_grad()) {
      throw GraphError(who + ": the " + (stage == Stage::back ? "Jacobian" : "Hessian") +
                       " does not depend on " + input +
                       " (strict mode with create_graph needs it to)");
    }
  }
  return grads;
}

// Off the tape unless the caller asked for a graph (PyTorch's _grad_postprocess).
std::vector<Tensor> finished(std::vector<Tensor> ts, bool create_graph) {
  if (!create_graph)
    for (Tensor& t : ts) t = t.detach();
  return ts;
}

// A tensor of zeros with a 1 at flat index k: the seed that picks one row of a Jacobian.
Tensor one_hot(const Shape& shape, Dtype dtype, int64_t k) {
  Tensor e = zeros(shape, dtype);
  dispatch(dtype, [&]<class T>() { e.data<T>()[k] = T(1); });
  return e;
}

// Shape a + shape b, checked against the largest rank.
Shape joined(const Shape& a, const Shape& b, const std::string& who, const std::string& what) {
  if (a.rank() + b.rank() > kMaxRank)
    throw ShapeError(who + ": " + what + " would be " + a.str() + " + " + b.str() + ", of rank " +
                     std::to_string(a.rank() + b.rank()) + "; tensors go to rank " +
                     std::to_string(kMaxRank));
  std::vector<int64_t> dims = a.vec();
  for (int64_t d : b.vec()) dims.push_back(d);
  return Shape(dims);
}

// The rows dy[k]/dx (k over y's elements, row-major) as one tensor of shape `block`,
// y.shape + x.shape.
Tensor assembled(const std::vector<Tensor>& rows, const Shape& y, const Shape& block) {
  if (y.rank() == 0) return rows[0];
  return reshape(stack(rows, 0), block.vec());
}

Jacobian jacobian_of(const Function& f, const std::vector<Tensor>& xs,
                     const FunctionalOptions& options, const std::string& who) {
  const GradModeGuard on(true);  // under a NoGradGuard too, as PyTorch's enable_grad
  const std::vector<Tensor> in = fresh_inputs(xs, options.create_graph, who);
  const std::vector<Tensor> out = call(f, in, options.strict, who);
  std::vector<std::vector<Shape>> blocks(out.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    for (std::size_t j = 0; j < in.size(); ++j)
      blocks[i].push_back(joined(out[i].shape(), in[j].shape(), who,
                                 "the block of output " + std::to_string(i) + " and input " +
                                     std::to_string(j)));
  Jacobian J(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<std::vector<Tensor>> rows(in.size());
    for (int64_t k = 0; k < out[i].numel(); ++k) {
      // One backward per element of y_i, the graph kept for the next (PyTorch retains it too).
      const std::vector<Tensor> row =
          grads_or_none({out[i]}, in, {one_hot(out[i].shape(), out[i].dtype(), k)},
                        options.create_graph, /*retain_graph=*/true);
      for (std::size_t j = 0; j < in.size(); ++j) {
        if (!row[j].defined()) {
          if (options.strict)
            throw GraphError(who + ": output " + std::to_string(i) + " of shape " +
                             out[i].shape().str() + " does not depend on input " +
                             std::to_string(j) + " of shape " + in[j].shape().str() +
                             " (strict mode)");
          rows[j].push_back(zeros_like(in[j]));
        } else if (options.strict && options.create_graph && !row[j].requires_grad()) {
          throw GraphError(who + ": the Jacobian of output " + std::to_string(i) +
                           " does not depend on input " + std::to_string(j) + " of shape " +
                           in[j].shape().str() + " (strict mode with create_graph needs it to)");
        } else {
          rows[j].push_back(row[j]);
        }
      }
    }
    for (std::size_t j = 0; j < in.size(); ++j)
      J[i].push_back(rows[j].empty() ? zeros(blocks[i][j], in[j].dtype())
                                     : assembled(rows[j], out[i].shape(), blocks[i][j]));
    J[i] = finished(std::move(J[i]), options.create_graph);
  }
  return J;
}

// f's one output of one element, squeezed to a scalar (for hessian, vhp, hvp).
Tensor scalar_output(const std::vector<Tensor>& out, const std::string& who) {
  if (out.size() != 1)
    throw ValueError(who + ": the function returned " + std::to_string(out.size()) +
                     " outputs; it must return one tensor of one element");
  if (out[0].numel() != 1)
    throw ShapeError(who + ": the function's output has shape " + out[0].shape().str() +
                     "; it must have one element");
  return out[0].rank() == 0 ? out[0] : reshape(out[0], std::vector<int64_t>{});
}

// The first steps of vhp and hvp: fresh inputs, v checked, f(x), and grad f with create_graph.
struct GradientOf {
  std::vector<Tensor> in, v;
  Tensor y;
  std::vector<Tensor> g;  // grad f, undefined for an input f does not use
};
GradientOf gradient_of(const Function& f, const std::vector<Tensor>& xs,
                       const std::vector<Tensor>& v, const FunctionalOptions& options,
                       const std::string& who) {
  GradientOf s;
  s.in = fresh_inputs(xs, options.create_graph, who);
  s.v = checked_v(v, s.in, "input", options.create_graph, who);
  s.y = scalar_output(call(f, s.in, options.strict, who), who);
  s.g = grads_or_none({s.y}, s.in, {}, /*create_graph=*/true, /*retain_graph=*/true);
  for (std::size_t j = 0; j < s.g.size() && options.strict; ++j) {
    if (!s.g[j].defined())
      throw GraphError(who + ": the function's output does not depend on input " +
                       std::to_string(j) + " of shape " + s.in[j].shape().str() + " (strict mode)");
    if (!s.g[j].requires_grad())
      throw GraphError(who + ": the gradient with respect to input " + std::to_string(j) +
                       " of shape " + s.in[j].shape().str() +
                       " does not depend on the inputs (a linear function?); strict mode needs "
                       "a function twice differentiable in them");
  }
  return s;
}

// f of one tensor as a function of vectors.
Function of_vectors(const TensorFunction& f) {
  return [&f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
}
std::vector<Tensor> one_or_none(const Tensor& t) {
  return t.defined() ? std::vector<Tensor>{t} : std::vector<Tensor>{};
}

enum class Product { vhp, hvp };

// vhp's v^T H or hvp's H v (see the top), f(x) beside it.
HessianProduct<std::vector<Tensor>> hessian_product(const Function& f,
                                                    const std::vector<Tensor>& xs,
                                                    const std::vector<Tensor>& v,
                                                    const FunctionalOptions& options, Product kind) {
  const std::string who = kind == Product::vhp ? "vhp" : "hvp";
  const bool graph = options.create_graph;
  if (kind == Product::hvp && !graph && !options.strict) {
    try {
      return hvp_forward_over_reverse(f, xs, v, who);
    } catch (const GraphError& e) {
      if (!is_missing_rule(e)) throw;  // an op without a tangent rule: the trick below
    }
  }
  const GradModeGuard on(true);
  GradientOf s = gradient_of(f, xs, v, options, who);
  std::vector<Tensor> p;
  if (kind == Product::vhp) {
    // v^T H = d<grad f, v>/dx.
    p = grads_or_none(s.g, s.in, s.v, graph, /*retain_graph=*/graph);
  } else {
    // w(u) = d<grad f, u>/dx = H^T u is linear in u; its vjp with v, d<w, v>/du, is H v.
    std::vector<Tensor> u;
    for (const Tensor& x : s.in) u.push_back(zeros_like(x).set_requires_grad());
    const std::vector<Tensor> w =
        grads_or_none(s.g, s.in, u, /*create_graph=*/true, /*retain_graph=*/true);
    p = grads_or_none(w, u, s.v, graph, /*retain_graph=*/graph);
  }
  p = fill_in_zeros(std::move(p), s.in, options,
                    kind == Product::vhp ? Stage::double_back : Stage::double_back_trick, who);
  return {finished({s.y}, graph)[0], finished(std::move(p), graph)};
}
HessianProduct<Tensor> hessian_product(const TensorFunction& f, const Tensor& x, const Tensor& v,
                                       const FunctionalOptions& options, Product kind) {
  auto r = hessian_product(of_vectors(f), {x}, one_or_none(v), options, kind);
  return {r.output, r.product[0]};
}

}  // namespace functional_detail
using namespace functional_detail;

VjpResult<std::vector<Tensor>> vjp(const Function& f, const std::vector<Tensor>& primals,
                                   const std::vector<Tensor>& cotangents,
                                   const FunctionalOptions& options) {
  const std::string who = "vjp";
  const GradModeGuard on(true);
  const std::vector<Tensor> in = fresh_inputs(primals, options.create_graph, who);
  const std::vector<Tensor> out = call(f, in, options.strict, who);
  const std::vector<Tensor> v = checked_v(cotangents, out, "output", options.create_graph, who);
  std::vector<Tensor> g =
      grads_or_none(out, in, v, options.create_graph, /*retain_graph=*/options.create_graph);
  g = fill_in_zeros(std::move(g), in, options, Stage::back, who);
  return {finished(out, options.create_graph), finished(std::move(g), options.create_graph)};
}

VjpResult<Tensor> vjp(const TensorFunction& f, const Tensor& primal, const Tensor& cotangent,
                      const FunctionalOptions& options) {
  auto r = vjp(of_vectors(f), {primal}, one_or_none(cotangent), options);
  return {r.outputs[0], r.vjps[0]};
}

Jacobian jacobian(const Function& f, const std::vector<Tensor>& inputs,
                  const FunctionalOptions& options) {
  return jacobian_of(f, inputs, options, "jacobian");
}

Tensor jacobian(const TensorFunction& f, const Tensor& input, const FunctionalOptions& options) {
  return jacobian_of(of_vectors(f), {input}, options, "jacobian")[0][0];
}

Jacobian hessian(const Function& f, const std::vector<Tensor>& inputs,
                 const FunctionalOptions& options) {
  const std::string who = "hessian";
  // The gradient of f as a function of the inputs, built with create_graph: its Jacobian is H.
  const Function gradient = [&](const std::vector<Tensor>& x) {
    const Function scalar_f = [&](const std::vector<Tensor>& xi) {
      return std::vector<Tensor>{scalar_output(call(f, xi, options.strict, who), who)};
    };
    // Not strict inside (PyTorch's neither): an input f does not use gets a gradient of zeros,
    // which the check below refuses with the rest of the gradients that do not depend on x.
    std::vector<Tensor> g = jacobian_of(scalar_f, x, {.create_graph = true}, who)[0];
    for (std::size_t j = 0; j < g.size() && options.strict; ++j)
      if (!g[j].requires_grad())
        throw GraphError(who + ": the gradient with respect to input " + std::to_string(j) +
                         " of shape " + x[j].shape().str() +
                         " does not depend on the inputs (a linear function?); strict mode "
                         "needs a function twice differentiable in them");
    return g;
  };
  return jacobian_of(gradient, inputs, options, who);
}

Tensor hessian(const TensorFunction& f, const Tensor& input, const FunctionalOptions& options) {
  return hessian(of_vectors(f), {input}, options)[0][0];
}

HessianProduct<std::vector<Tensor>> vhp(const Function& f, const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& v,
                                        const FunctionalOptions& options) {
  return hessian_product(f, inputs, v, options, Product::vhp);
}
HessianProduct<std::vector<Tensor>> hvp(const Function& f, const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& v,
                                        const FunctionalOptions& options) {
  return hessian_product(f, inputs, v, options, Product::hvp);
}

HessianProduct<Tensor> vhp(const TensorFunction& f, const Tensor& input, const Tensor& v,
                           const FunctionalOptions& options) {
  return hessian_product(f, input, v, options, Product::vhp);
}
HessianProduct<Tensor> hvp(const TensorFunction& f, const Tensor& input, const Tensor& v,
                           const FunctionalOptions& options) {
  return hessian_product(f, input, v, options, Product::hvp);
}

}  // namespace tg
