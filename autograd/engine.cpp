// The backward pass: an iterative topological walk over the tape (no recursion, so a chain of a
// million ops is fine), and the node lifetime rules that make freeing such a chain safe too.

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "ops/add.h"

namespace tg {

// ---- node lifetime ---------------------------------------------------------------------------
// Deleting a node drops its edges and closure, which may drop the last reference to the next
// node, and so on down a chain: plain recursion would overflow the stack on a long chain. The
// deleter therefore queues nodes and the outermost deleter drains the queue in a loop.

namespace {
struct DeleteQueue {
  std::vector<Node*> pending;
  bool draining = false;
};
thread_local DeleteQueue delete_queue;

struct NodeDeleter {
  void operator()(Node* n) const {
    DeleteQueue& q = delete_queue;
    q.pending.push_back(n);
    if (q.draining) return;
    q.draining = true;
    while (!q.pending.empty()) {
      Node* p = q.pending.back();
      q.pending.pop_back();
      delete p;  // may push more nodes; they are deleted by this loop
    }
    q.draining = false;
  }
};
}  // namespace

std::shared_ptr<Node> make_node() { return std::shared_ptr<Node>(new Node, NodeDeleter{}); }

void Node::release() {
  backward = nullptr;
  output_storage.reset();
  released = true;
}

namespace detail {

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor attach(Tensor out, const char* op, std::initializer_list<Tensor> inputs, BackwardFn fn,
              bool saves_output, const std::source_location& where) {
  auto node = make_node();
  node->op = op;
  node->where = where;
  int i = 0;
  for (const Tensor& t : inputs) {
    Edge& e = node->next[i++];
    if (!t.defined() || !t.requires_grad()) continue;
    e.shape = t.shape();
    if (t.is_leaf())
      e.leaf = t.impl_ptr();
    else
      e.node = t.impl().grad_fn;
  }
  node->num_inputs = i;
  node->backward = std::move(fn);
  node->saves_output = saves_output;
  if (saves_output) node->output_storage = out.impl().storage;
  node->output_shape = out.shape();
  node->output_dtype = out.dtype();
  // The output gets a fresh impl, so a caller's other handles to `out` stay untouched.
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = out.shape();
  impl->dtype = out.dtype();
  impl->storage = out.impl().storage;
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
  return Tensor(std::move(impl));
}

}  // namespace detail

// ---- backward --------------------------------------------------------------------------------

namespace {

std::string where_str(const Node& n) {
  return std::string(n.where.file_name()) + ":" + std::to_string(n.where.line());
}

void check_grad_output(const Tensor& out, const Tensor& g, const char* who) {
  if (g.shape() != out.shape())
    throw ShapeError(std::string(who) + ": grad_output of shape " + g.shape().str() +
                     " does not match output of shape " + out.shape().str());
  if (g.dtype() != out.dtype())
    throw ValueError(std::string(who) + ": grad_output is " + dtype_name(g.dtype()) +
                     " but the output is " + dtype_name(out.dtype()));
}

// Adds g into the slot (undefined means zero so far).
void accumulate(Tensor& slot, const Tensor& g) { slot = slot.defined() ? add(slot, g) : g; }

struct Run {
  // Per reached node: the summed incoming gradient and how many consumers are still to come.
  struct State {
    Tensor grad;
    int waiting = 0;
  };
  std::unordered_map<Node*, State> nodes;
  std::unordered_map<TensorImpl*, Tensor> leaf_grads;  // staged, committed at the end

  // Finds every node reachable from the roots and counts its consumers; throws before any work
  // when the graph was freed by an earlier backward.
  void discover(const std::vector<Node*>& roots) {
    std::vector<Node*> stack;
    for (Node* r : roots)
      if (nodes.emplace(r, State{}).second) stack.push_back(r);
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->released)
        throw GraphError(std::string("backward: the graph through '") + n->op + "' (recorded at " +
                         where_str(*n) +
                         ") was freed by an earlier backward; pass retain_graph=true to the "
                         "first backward to go through it twice");
      for (int i = 0; i < n->num_inputs; ++i) {
        Node* c = n->next[i].node.get();
        if (!c) continue;
        auto [it, fresh] = nodes.emplace(c, State{});
        ++it->second.waiting;
        if (fresh) stack.push_back(c);
      }
    }
  }

  void execute(std::vector<Node*> ready, bool retain_graph, bool create_graph,
               const std::unordered_map<Node*, int>& capture, std::vector<Tensor>& captured) {
    GradModeGuard mode(create_graph);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      State& s = nodes[n];
      Tensor dY = std::move(s.grad);
      if (auto c = capture.find(n); c != capture.end() && dY.defined()) captured[c->second] = dY;
      Grads grads;
      if (dY.defined()) {
        Tensor Y;
        if (n->saves_output) {
          auto impl = std::make_shared<TensorImpl>();
          impl->shape = n->output_shape;
          impl->dtype = n->output_dtype;
          impl->storage = n->output_storage;
          impl->requires_grad = true;
          impl->grad_fn = n->shared_from_this();
          Y = Tensor(std::move(impl));
        }
        grads = n->backward(dY, Y);
        if (!retain_graph) n->release();
      } else if (!retain_graph) {
        n->release();
      }
      for (int i = 0; i < n->num_inputs; ++i) {
        const Edge& e = n->next[i];
        if (!e.active()) continue;
        const Tensor& g = grads[i];
        if (g.defined() && g.shape() != e.shape)
          throw GraphError(std::string("backward of '") + n->op + "' returned a gradient of shape " +
                           g.shape().str() + " for input " + std::to_string(i) + " of shape " +
                           e.shape.str());
        if (e.leaf) {
          if (g.defined()) accumulate(leaf_grads[e.leaf.get()], g);
          continue;
        }
        State& c = nodes[e.node.get()];
        if (g.defined()) accumulate(c.grad, g);
        if (--c.waiting == 0) ready.push_back(e.node.get());
      }
    }
  }
};

std::vector<Tensor> run_backward(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& grad_outputs, bool retain_graph,
                                 bool create_graph, const std::vector<Tensor>* inputs,
                                 const char* who) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw ValueError(std::string(who) + ": " + std::to_string(outputs.size()) + " outputs but " +
                     std::to_string(grad_outputs.size()) + " grad_outputs");
  std::vector<Tensor> seeds(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& y = outputs[k];
    if (!y.requires_grad())
      throw GraphError(std::string(who) + ": output of shape " + y.shape().str() +
                       " does not require grad (no input that requires grad reaches it, or it "
                       "was made under NoGradGuard)");
    if (k < grad_outputs.size() && grad_outputs[k].defined()) {
      check_grad_output(y, grad_outputs[k], who);
      seeds[k] = grad_outputs[k];
    } else if (y.numel() == 1) {
      seeds[k] = ones(y.shape(), y.dtype());
    } else {
      throw GraphError(std::string(who) + ": output of shape " + y.shape().str() +
                       " is not a scalar; pass a grad_output of that shape");
    }
  }

  Run run;
  std::vector<Node*> roots;
  for (const Tensor& y : outputs)
    if (!y.is_leaf()) roots.push_back(y.impl().grad_fn.get());
  run.discover(roots);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].is_leaf())
      accumulate(run.leaf_grads[outputs[k].impl_ptr().get()], seeds[k]);
    else
      accumulate(run.nodes[outputs[k].impl().grad_fn.get()].grad, seeds[k]);
  }

  std::unordered_map<Node*, int> capture;
  std::vector<Tensor> captured;
  if (inputs) {
    captured.resize(inputs->size());
    for (std::size_t i = 0; i < inputs->size(); ++i)
      if (!(*inputs)[i].is_leaf()) capture[(*inputs)[i].impl().grad_fn.get()] = static_cast<int>(i);
  }
  std::vector<Node*> ready;
  for (Node* r : roots)
    if (run.nodes[r].waiting == 0 &&
        std::find(ready.begin(), ready.end(), r) == ready.end())
      ready.push_back(r);
  run.execute(std::move(ready), retain_graph, create_graph, capture, captured);

  if (inputs) {
    for (std::size_t i = 0; i < inputs->size(); ++i) {
      const Tensor& x = (*inputs)[i];
      if (x.is_leaf()) {
        auto it = run.leaf_grads.find(x.impl_ptr().get());
        if (it != run.leaf_grads.end()) captured[i] = it->second;
      }
      if (!captured[i].defined()) captured[i] = zeros(x.shape(), x.dtype());
    }
    return captured;
  }
  // Commit the staged leaf gradients only now: an error above leaves every .grad() untouched.
  GradModeGuard mode(create_graph);
  for (auto& [leaf, g] : run.leaf_grads) {
    if (!leaf->requires_grad) continue;
    auto& slot = leaf->grad;
    if (!slot) {
      // Keep our own buffer: g may alias a tensor the caller holds (grad_output, a view).
      slot = (create_graph ? g : (g.impl_ptr().use_count() == 1 ? g : g.clone())).impl_ptr();
    } else if (create_graph || slot->grad_fn) {
      slot = add(Tensor(slot), g).impl_ptr();
    } else {
      Tensor acc(slot);
      dispatch(acc.dtype(), [&]<class T>() {
        T* a = acc.data<T>();
        const T* b = g.data<T>();
        for (int64_t i = 0; i < acc.numel(); ++i) a[i] += b[i];
      });
    }
  }
  return {};
}

}  // namespace

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  // A recorded backward refers back to the forward nodes, so create_graph keeps the graph.
  run_backward({*this}, {grad_output}, retain_graph || create_graph, create_graph, nullptr,
               "backward");
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool create_graph,
                         int retain_graph) {
  for (const Tensor& x : inputs)
    if (!x.requires_grad())
      throw GraphError("grad: an input of shape " + x.shape().str() + " does not require grad");
  const bool retain = retain_graph < 0 ? create_graph : retain_graph != 0;
  return run_backward(outputs, grad_outputs, retain, create_graph, &inputs, "grad");
}

}  // namespace tg
