#pragma once
// The tape. Each op that sees an input requiring grad (with grad mode on) records a Node on its
// output: the edges to its inputs and a backward closure written with tg ops, so that the
// backward pass can itself be recorded (create_graph) and differentiated again.
//
// Ops call tg::record(...) right under their forward, micrograd style:
//
//   Tensor Y = ...forward...;
//   return record("softmax", Y, {X}, [](const Tensor& dY, const Tensor& Y) -> Grads {
//     return {mul(Y, sub(dY, sum(mul(dY, Y), -1, true)))};  // dX
//   });
//
// A closure that takes (dY, Y) gets the op's output back, attached to this node, so a formula in Y
// stays differentiable; a closure that takes only (dY) does not keep the output alive.

#include <array>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <type_traits>

#include "autograd/backward_fn.h"
#include "autograd/grad_mode.h"
#include "autograd/tensor.h"

namespace tg {

struct Edge {
  std::shared_ptr<Node> node;        // the input's own node, for a non-leaf input
  std::shared_ptr<TensorImpl> leaf;  // the input itself, for a requires_grad leaf
  Shape shape;                       // the input's shape, to check what backward returns
  bool active() const { return node || leaf; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  const char* op = "";
  std::array<Edge, kMaxInputs> next{};
  int num_inputs = 0;
  BackwardFn backward;
  bool saves_output = false;
  std::shared_ptr<Storage> output_storage;  // only when saves_output
  Shape output_shape;
  Dtype output_dtype = Dtype::f64;
  bool released = false;  // backward ran without retain_graph: the closure is gone
  std::source_location where;  // the user's call that recorded this node
  int slot = -1;  // this node's state in the backward pass now running (engine-private)

  Node() {}  // user-provided: make_shared does not zero the block before the initialisers
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Hands edges and closure to a per-thread queue drained in a loop, so freeing a chain of a
  /// million nodes never recurses a million deep.
  ~Node();
  /// Drops what backward needed (closure, saved output).
  void release();
};

/// Makes a node (one block, from the per-thread pool).
std::shared_ptr<Node> make_node();

namespace detail {
bool any_requires_grad(std::initializer_list<Tensor> inputs);
/// Makes the node of `out`, with edges to `inputs`, and returns `out` attached to it; `node` is
/// set to the node, whose closure the caller then builds in place.
Tensor attach(Tensor out, const char* op, std::initializer_list<Tensor> inputs, bool saves_output,
              const std::source_location& where, Node*& node);
}  // namespace detail

/// Records `out` as made by `op` from `inputs` when grad mode is on and any input requires grad;
/// otherwise returns `out` untouched. `fn` is (dY) -> Grads or (dY, Y) -> Grads.
template <class F>
Tensor record(const char* op, Tensor out, std::initializer_list<Tensor> inputs, F&& fn,
              const std::source_location& where = std::source_location::current()) {
  if (!is_grad_enabled() || !detail::any_requires_grad(inputs)) return out;
  constexpr bool takes_output = std::is_invocable_v<F, const Tensor&, const Tensor&>;
  Node* node;
  Tensor y = detail::attach(std::move(out), op, inputs, takes_output, where, node);
  if constexpr (takes_output)
    node->backward.emplace(std::forward<F>(fn));
  else
    node->backward.emplace(
        [f = std::forward<F>(fn)](const Tensor& dY, const Tensor&) { return f(dY); });
  return y;
}

/// Gradients of `outputs` (weighted by `grad_outputs`) with respect to `inputs`, returned rather
/// than accumulated into .grad(), like torch.autograd.grad. An input the outputs do not depend on
/// gets zeros. retain_graph defaults to create_graph.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false,
                         int retain_graph = -1);

}  // namespace tg
