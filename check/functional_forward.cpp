// The functional API's forward-mode half (functional.h): jvp, jacobian's forward mode and the
// Hessian by forward over reverse, each on dual inputs in a DualLevel (autograd/forward_ad.h).
// (is_missing_rule stays for callers that fall back to reverse mode.)

#include <optional>
#include <string>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/check/functional.h>
#include <tapegrad/check/functional_detail.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/stack.h>

namespace tg {
namespace functional_detail {

bool is_missing_rule(const GraphError& e) {
  return std::string(e.what()).starts_with("forward AD: '");
}

namespace {

// The inputs a forward pass starts from: the caller's, on the tape only with create_graph.
std::vector<Tensor> plain_inputs(const std::vector<Tensor>& xs, bool create_graph, const std::string& who) {
  if (xs.empty()) throw ValueError(who + ": no inputs");
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    check_float(xs[i], who, nth("input", i));
    in.push_back(create_graph ? xs[i] : xs[i].detach());
  }
  return in;
}

// f's outputs at `in`, where input j carries tangent t_j (undefined: none), and their tangents
// (zeros for an output no tangent reaches, or with strict a GraphError). Opens its own level.
struct Pushed {
  std::vector<Tensor> outputs, tangents;
};
Pushed push_forward(const Function& f, const std::vector<Tensor>& in, const std::vector<Tensor>& t,
                    bool strict, const std::string& who) {
  fwad::DualLevel level;
  std::vector<Tensor> duals;
  for (std::size_t j = 0; j < in.size(); ++j)
    duals.push_back(t[j].defined() ? fwad::make_dual(in[j], t[j]) : in[j]);
  const std::vector<Tensor> out = f(duals);
  if (out.empty())
    throw ValueError(who + ": the function returned no outputs; it must return at least one tensor");
  Pushed p;
  for (std::size_t i = 0; i < out.size(); ++i) {
    check_float(out[i], who, nth("output", i) + " of the function");
    fwad::UnpackedDual u = fwad::unpack_dual(out[i]);
    if (!u.tangent.defined()) {
      if (strict)
        throw GraphError(who + ": output " + std::to_string(i) + " of shape " + out[i].shape().str() +
                         " does not depend on the inputs (strict mode)");
      u.tangent = zeros_like(out[i]);
    }
    p.outputs.push_back(u.primal);
    p.tangents.push_back(u.tangent);
  }
  return p;
}

// Columns (one tensor of shape `of` per element of an input of shape `by`) as one block of shape
// of + by.
Tensor columns(const std::vector<Tensor>& cols, const Shape& of, const Shape& by, Dtype dtype,
               const std::string& who, const std::string& what) {
  const Shape block = joined(of, by, who, what);
  if (cols.empty()) return zeros(block, dtype);
  return reshape(stack(cols, of.rank()), block.vec());
}

Jacobian jacobian_forward(const Function& f, const std::vector<Tensor>& xs,
                          const FunctionalOptions& options, const std::string& who) {
  const GradModeGuard mode(options.create_graph);
  const std::vector<Tensor> in = plain_inputs(xs, options.create_graph, who);
  // One plain call for the outputs' shapes (an input of no elements gets no column).
  std::vector<Tensor> shapes_of;
  {
    const std::vector<Tensor> out = f(in);
    if (out.empty())
      throw ValueError(who + ": the function returned no outputs; it must return at least one tensor");
    for (std::size_t i = 0; i < out.size(); ++i) check_float(out[i], who, nth("output", i) + " of the function");
    shapes_of = out;
  }
  Jacobian J(shapes_of.size());
  for (std::size_t j = 0; j < in.size(); ++j) {
    std::vector<std::vector<Tensor>> cols(shapes_of.size());
    for (int64_t k = 0; k < in[j].numel(); ++k) {
      std::vector<Tensor> t(in.size());
      t[j] = one_hot(in[j].shape(), in[j].dtype(), k);
      const Pushed p = push_forward(f, in, t, options.strict, who);
      for (std::size_t i = 0; i < p.tangents.size(); ++i) cols[i].push_back(p.tangents[i]);
    }
    for (std::size_t i = 0; i < shapes_of.size(); ++i)
      J[i].push_back(columns(cols[i], shapes_of[i].shape(), in[j].shape(), shapes_of[i].dtype(), who,
                             "the block of output " + std::to_string(i) + " and input " + std::to_string(j)));
  }
  for (auto& row : J) row = finished(std::move(row), options.create_graph);
  return J;
}

}  // namespace

Jacobian hessian_forward_over_reverse(const Function& f, const std::vector<Tensor>& xs,
                                      const std::string& who) {
  const GradModeGuard on(true);
  const std::vector<Tensor> in = fresh_inputs(xs, /*create_graph=*/false, who);
  std::vector<std::vector<std::vector<Tensor>>> cols(in.size(), std::vector<std::vector<Tensor>>(in.size()));
  for (std::size_t j = 0; j < in.size(); ++j)
    for (int64_t k = 0; k < in[j].numel(); ++k) {
      fwad::DualLevel level;
      std::vector<Tensor> duals = in;
      duals[j] = fwad::make_dual(in[j], one_hot(in[j].shape(), in[j].dtype(), k));
      const Tensor y = scalar_output(call(f, duals, /*strict=*/false, who), who);
      // The reverse pass computes with the formulas, whose ops carry the tangents: grad f's
      // tangent is d(grad f)/dx_j[k], column k of every block H[i][j].
      const std::vector<Tensor> g = y.requires_grad() ? grad({y}, in) : std::vector<Tensor>(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) {
        Tensor c = g[i].defined() ? fwad::unpack_dual(g[i]).tangent : Tensor();
        cols[i][j].push_back(c.defined() ? c.detach() : zeros_like(in[i]));
      }
    }
  Jacobian H(in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    for (std::size_t j = 0; j < in.size(); ++j)
      H[i].push_back(columns(cols[i][j], in[i].shape(), in[j].shape(), in[i].dtype(), who,
                             "the block of inputs " + std::to_string(i) + " and " + std::to_string(j)));
  return H;
}

HessianProduct<std::vector<Tensor>> hvp_forward_over_reverse(const Function& f,
                                                             const std::vector<Tensor>& xs,
                                                             const std::vector<Tensor>& v,
                                                             const std::string& who) {
  const GradModeGuard on(true);
  const std::vector<Tensor> in = fresh_inputs(xs, /*create_graph=*/false, who);
  std::vector<Tensor> t = checked_v(v, in, "input", /*create_graph=*/false, who);
  if (t.empty()) t.push_back(ones_like(in[0]));
  fwad::DualLevel level;
  std::vector<Tensor> duals;
  for (std::size_t j = 0; j < in.size(); ++j) duals.push_back(fwad::make_dual(in[j], t[j]));
  const Tensor y = scalar_output(call(f, duals, /*strict=*/false, who), who);
  // grad f by the reverse pass at x + v eps: its tangent is H v.
  const std::vector<Tensor> g = y.requires_grad() ? grad({y}, in) : std::vector<Tensor>(in.size());
  std::vector<Tensor> Hv;
  for (std::size_t j = 0; j < in.size(); ++j) {
    const Tensor c = g[j].defined() ? fwad::unpack_dual(g[j]).tangent : Tensor();
    Hv.push_back(c.defined() ? c.detach() : zeros_like(in[j]));
  }
  return {fwad::unpack_dual(y).primal.detach(), Hv};
}

}  // namespace functional_detail
using namespace functional_detail;

JvpResult<std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                   const std::vector<Tensor>& tangents, const FunctionalOptions& options) {
  const std::string who = "jvp";
  const GradModeGuard mode(options.create_graph);  // forward only, unless a graph is wanted
  const std::vector<Tensor> in = plain_inputs(primals, options.create_graph, who);
  std::vector<Tensor> t = checked_v(tangents, in, "input", options.create_graph, who);
  if (t.empty()) t.push_back(ones_like(in[0]));
  const Pushed p = push_forward(f, in, t, options.strict, who);
  return {finished(p.outputs, options.create_graph), finished(p.tangents, options.create_graph)};
}

JvpResult<Tensor> jvp(const TensorFunction& f, const Tensor& primal, const Tensor& tangent,
                      const FunctionalOptions& options) {
  auto r = jvp(of_vectors(f), {primal}, one_or_none(tangent), options);
  return {r.outputs[0], r.jvps[0]};
}

Jacobian hessian(const Function& f, const std::vector<Tensor>& inputs, JacobianMode outer,
                 const FunctionalOptions& options) {
  if (outer == JacobianMode::reverse || options.create_graph || options.strict)
    return hessian(f, inputs, options);
  return hessian_forward_over_reverse(f, inputs, "hessian");
}

Tensor hessian(const TensorFunction& f, const Tensor& input, JacobianMode outer,
               const FunctionalOptions& options) {
  return hessian(of_vectors(f), {input}, outer, options)[0][0];
}

Jacobian jacobian(const Function& f, const std::vector<Tensor>& inputs, JacobianMode mode,
                  const FunctionalOptions& options) {
  return mode == JacobianMode::forward ? jacobian_forward(f, inputs, options, "jacobian")
                                       : jacobian(f, inputs, options);
}

Tensor jacobian(const TensorFunction& f, const Tensor& input, JacobianMode mode,
                const FunctionalOptions& options) {
  return jacobian(of_vectors(f), {input}, mode, options)[0][0];
}

}  // namespace tg
