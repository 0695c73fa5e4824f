#pragma once
// The steps the functional API's reverse-mode (functional.cpp) and forward-mode
// (functional_forward.cpp) halves share; internal, not installed.

#include <string>
#include <vector>

#include <tapegrad/check/functional.h>

namespace tg::functional_detail {

/// "input 2".
std::string nth(const char* what, std::size_t i);
/// Throws ValueError naming `who` and `what` unless t is a defined float tensor.
void check_float(const Tensor& t, const std::string& who, const std::string& what);
/// The inputs f sees (see functional.cpp).
std::vector<Tensor> fresh_inputs(const std::vector<Tensor>& xs, bool create_graph, const std::string& who);
/// f's outputs, checked: at least one, each a float tensor (with strict, each requiring grad).
std::vector<Tensor> call(const Function& f, const std::vector<Tensor>& in, bool strict, const std::string& who);
/// The vectors v paired with refs (one each, same shape and dtype), or {} for one ref of one
/// element.
std::vector<Tensor> checked_v(const std::vector<Tensor>& v, const std::vector<Tensor>& refs,
                              const char* ref_name, bool create_graph, const std::string& who);
/// Off the tape unless the caller asked for a graph.
std::vector<Tensor> finished(std::vector<Tensor> ts, bool create_graph);
/// Zeros with a 1 at flat index k.
Tensor one_hot(const Shape& shape, Dtype dtype, int64_t k);
/// Shape a + shape b, checked against the largest rank.
Shape joined(const Shape& a, const Shape& b, const std::string& who, const std::string& what);
/// f's one output of one element, as a scalar.
Tensor scalar_output(const std::vector<Tensor>& out, const std::string& who);
/// f of one tensor as a function of vectors.
Function of_vectors(const TensorFunction& f);
std::vector<Tensor> one_or_none(const Tensor& t);
/// hessian by forward over reverse (functional_forward.cpp); throws GraphError (naming the op)
/// when f meets an op without a tangent rule.
Jacobian hessian_forward_over_reverse(const Function& f, const std::vector<Tensor>& xs,
                                      const std::string& who);
/// hvp by forward over reverse: grad f by the reverse pass at x + v eps carries H v as its
/// tangent (one forward and one backward, where the double-backward trick runs three
/// backwards). Throws GraphError (naming the op) when f meets an op without a tangent rule.
HessianProduct<std::vector<Tensor>> hvp_forward_over_reverse(const Function& f,
                                                             const std::vector<Tensor>& xs,
                                                             const std::vector<Tensor>& v,
                                                             const std::string& who);
/// Whether e is forward mode's "has no tangent rule" error.
bool is_missing_rule(const GraphError& e);

}  // namespace tg::functional_detail
