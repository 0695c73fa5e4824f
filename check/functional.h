#pragma once
// The functional API of torch.autograd.functional, on reverse mode: derivatives of a function
// f of tensors, not of a tape the caller built. For f: (x_1 .. x_n) -> (y_1 .. y_m),
//
//   vjp(f, x, v)      = (f(x), J^T v)         one backward: sum_i v_i^T dy_i/dx_j for every j
//   jacobian(f, x)    = J[i][j] = dy_i/dx_j   one backward per element of each y_i, shape
//                                             y_i.shape + x_j.shape (PyTorch's layout)
//   hessian(f, x)     = H[i][j] = d2 f / dx_i dx_j   of a scalar f: the jacobian of the
//                                             gradient built with create_graph (reverse over
//                                             reverse), shape x_i.shape + x_j.shape
//   vhp(f, x, v)      = (f(x), v^T H)         grad(<grad f, v>): two backwards
//   hvp(f, x, v)      = (f(x), H v)           forward over reverse: grad f by the reverse pass
//                                             at x + v eps carries H v as its tangent (one
//                                             forward, one backward). With create_graph or
//                                             strict, or where f meets an op without a tangent
//                                             rule, PyTorch's double-backward trick: g = grad f
//                                             (with create_graph), u = zeros requiring grad,
//                                             w = grad(<g, u>) = H^T u, then H v = grad(<w, v>)
//                                             w.r.t. u; equal to vhp's where H is symmetric
//
// Conventions, as PyTorch's: f runs with grad mode on, on fresh inputs (the caller's detached,
// or with create_graph and an input that requires grad, a copy on the tape, so the results can
// be differentiated again back to it). An input that no output depends on gets zeros, or with
// `strict` a GraphError; an output that does not require grad counts as independent of every
// input. Without create_graph the results are off the tape. f takes and returns
// std::vector<Tensor>; each function also takes f of one Tensor returning one Tensor, and then
// returns Tensors instead of vectors. Inputs, outputs and cotangents are float32 or float64.
//
// Forward mode (functional_forward.cpp), on the ops' tangent rules (autograd/forward_ad.h):
//
//   jvp(f, x, t)      = (f(x), J t)           one forward pass with dual inputs, no backward
//   jacobian(f, x, JacobianMode::forward)     one such pass per element of each x_j: the columns
//   hessian(f, x, JacobianMode::forward)   forward over reverse (PyTorch's
//                     outer_jacobian_strategy="forward-mode"): in a DualLevel with x_j + e_k eps,
//                     grad f by the reverse pass carries column k of H[.][j] as its tangent. One
//                     forward and backward per input entry, where reverse over reverse (the
//                     default, as PyTorch's) runs f once and then one backward of the double
//                     graph per entry: several times faster here, without a vmap to batch the
//                     tangents (1,006 parameters of a tanh MLP: 68 against 12 ms, float)
//
// Built on tg::grad's engine (which can leave an unreached input's gradient undefined, PyTorch's
// None, for strict mode). Jacobians are assembled with ops' stack and reshape: it lives in check/,
// above ops, beside gradcheck.

#include <functional>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// A function the functional API differentiates: tensors in, tensors out.
using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
/// A function of one tensor returning one tensor.
using TensorFunction = std::function<Tensor(const Tensor&)>;

struct FunctionalOptions {
  bool create_graph = false;  // record the computation, so the results can be differentiated
  bool strict = false;        // an input no output depends on is a GraphError, not zeros
};

/// Jacobian or Hessian blocks: J[i][j] of output (or input) i with respect to input j.
using Jacobian = std::vector<std::vector<Tensor>>;

/// What vjp returns: f's outputs and J^T v for each input (T: std::vector<Tensor>, or Tensor
/// for a function of one tensor).
template <class T>
struct VjpResult {
  T outputs;
  T vjps;
};
/// What hvp and vhp return: f's scalar output and the product for each input.
template <class T>
struct HessianProduct {
  Tensor output;
  T product;
};

/// f's outputs and v^T J (one tensor per input, of its shape). v holds one cotangent per output
/// (of its shape and dtype); empty (undefined) is allowed for one output of one element (then
/// 1). Throws ValueError (f returns nothing, a count or dtype that does not match, an input that
/// is not float), ShapeError (a cotangent of another shape), GraphError (strict).
VjpResult<std::vector<Tensor>> vjp(const Function& f, const std::vector<Tensor>& primals,
                                   const std::vector<Tensor>& cotangents = {},
                                   const FunctionalOptions& options = {});
VjpResult<Tensor> vjp(const TensorFunction& f, const Tensor& primal,
                      const Tensor& cotangent = Tensor(), const FunctionalOptions& options = {});

/// The Jacobian blocks J[i][j] = dy_i/dx_j of shape y_i.shape + x_j.shape, by reverse mode.
/// Throws as vjp does, and ShapeError when a block would pass the largest rank.
Jacobian jacobian(const Function& f, const std::vector<Tensor>& inputs,
                  const FunctionalOptions& options = {});
Tensor jacobian(const TensorFunction& f, const Tensor& input, const FunctionalOptions& options = {});

/// What jvp returns: f's outputs and J t for each output.
template <class T>
struct JvpResult {
  T outputs;
  T jvps;
};

/// f's outputs and J t (one tensor per output, of its shape) by forward mode: one pass with
/// dual inputs, no backward (torch.func.jvp; torch.autograd.functional.jvp's results). t holds one
/// tangent per input (of its shape and dtype); empty is allowed for one input of one element
/// (then 1). An output no input reaches gets zeros, or with `strict` a GraphError. Throws as vjp
/// does for t, and GraphError when f meets an op without a tangent rule (naming it) or a
/// forward-AD level is open already.
JvpResult<std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                   const std::vector<Tensor>& tangents = {},
                                   const FunctionalOptions& options = {});
JvpResult<Tensor> jvp(const TensorFunction& f, const Tensor& primal, const Tensor& tangent = Tensor(),
                      const FunctionalOptions& options = {});

/// How jacobian computes: a backward per output element (reverse), or a forward pass per input
/// element (forward: fewer passes where the inputs are the smaller side). The results are equal.
enum class JacobianMode { reverse, forward };
Jacobian jacobian(const Function& f, const std::vector<Tensor>& inputs, JacobianMode mode,
                  const FunctionalOptions& options = {});
Tensor jacobian(const TensorFunction& f, const Tensor& input, JacobianMode mode,
                const FunctionalOptions& options = {});

/// The Hessian blocks of hessian() below, with the outer Jacobian (of the gradient) taken by
/// `outer`: reverse (reverse over reverse, as hessian()) or forward (forward over reverse; with
/// create_graph or strict, reverse). Throws as hessian() does, and GraphError when forward over
/// reverse meets an op without a tangent rule.
Jacobian hessian(const Function& f, const std::vector<Tensor>& inputs, JacobianMode outer,
                 const FunctionalOptions& options = {});
Tensor hessian(const TensorFunction& f, const Tensor& input, JacobianMode outer,
               const FunctionalOptions& options = {});

/// The Hessian blocks H[i][j] = d2 f / dx_i dx_j of shape x_i.shape + x_j.shape of a function
/// returning one tensor of one element. Throws as jacobian does, and ValueError / ShapeError
/// when f returns more than one tensor or one of more than one element.
Jacobian hessian(const Function& f, const std::vector<Tensor>& inputs,
                 const FunctionalOptions& options = {});
Tensor hessian(const TensorFunction& f, const Tensor& input, const FunctionalOptions& options = {});

/// f(x) and v^T H, for f returning one tensor of one element; v holds one tensor per input (of
/// its shape and dtype), empty only for one input of one element. Throws as hessian does, and
/// as vjp does for v.
HessianProduct<std::vector<Tensor>> vhp(const Function& f, const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& v = {},
                                        const FunctionalOptions& options = {});
HessianProduct<Tensor> vhp(const TensorFunction& f, const Tensor& input, const Tensor& v = Tensor(),
                           const FunctionalOptions& options = {});

/// f(x) and H v, by forward over reverse or the double-backward trick (see the top); throws as
/// vhp does.
HessianProduct<std::vector<Tensor>> hvp(const Function& f, const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& v = {},
                                        const FunctionalOptions& options = {});
HessianProduct<Tensor> hvp(const TensorFunction& f, const Tensor& input, const Tensor& v = Tensor(),
                           const FunctionalOptions& options = {});

}  // namespace tg
