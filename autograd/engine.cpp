// The backward pass: an iterative topological walk over the tape (no recursion, so a chain of a
// million ops is fine), and the node lifetime rules that make freeing such a chain safe too.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/grad_ready.h"
#include "autograd/node.h"
#include "autograd/pool.h"

namespace tg {

// ---- node lifetime ---------------------------------------------------------------------------
// Deleting a node drops its edges and closure, which may drop the last reference to the next
// node, and so on down a chain: plain recursion would overflow the stack on a long chain. So a
// dying node moves what it holds into a per-thread queue, and the outermost one drains it.

namespace {
struct ReleaseQueue {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<BackwardFn> closures;  // they hold tensors, which hold nodes
  bool draining = false;
};
thread_local ReleaseQueue release_queue;

// Empties v, and gives its memory back when a huge graph made it huge (else it is kept, so the
// next use of v allocates nothing).
template <class V>
void clear_keeping_small(V& v) {
  v.clear();
  if (v.capacity() > 4096) V().swap(v);
}

void drain(ReleaseQueue& q) {
  if (q.draining) return;
  q.draining = true;
  while (!q.nodes.empty() || !q.closures.empty()) {
    if (!q.closures.empty()) {
      BackwardFn f = std::move(q.closures.back());
      q.closures.pop_back();
      f.reset();  // may queue more
    } else {
      std::shared_ptr<Node> n = std::move(q.nodes.back());
      q.nodes.pop_back();
      n.reset();  // may queue more
    }
  }
  clear_keeping_small(q.nodes);
  clear_keeping_small(q.closures);
  q.draining = false;
}

// Destroys a node's closure: in place when no drain is running (a node that frees then only
// queues what it holds, drained right after), else queued for the drain that is.
void drop_closure(BackwardFn& f, ReleaseQueue& q) {
  if (!f) return;
  if (q.draining) {
    q.closures.push_back(std::move(f));
    return;
  }
  q.draining = true;
  f.reset();
  q.draining = false;
  drain(q);
}
}  // namespace

Node::~Node() {
  ReleaseQueue& q = release_queue;
  for (Edge& e : next)
    if (e.node) q.nodes.push_back(std::move(e.node));
  drop_closure(formula, q);
  drop_closure(kernel, q);
  drain(q);
}

void Node::release() {
  ReleaseQueue& q = release_queue;
  drop_closure(formula, q);
  drop_closure(kernel, q);
  output_storage.reset();
  released = true;
  drain(q);
}

std::shared_ptr<Node> make_node() { return detail::make_pooled<Node>(); }

namespace detail {

bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void save(Node& node, const Tensor& t) {
  if (!t.defined()) return;
  if (node.num_saved == kMaxSaved)
    throw GraphError(std::string("record: '") + node.op + "' saves more than " +
                     std::to_string(kMaxSaved) + " tensors");
  node.saved[node.num_saved++] = SavedVersion{t.impl().storage.get(), t.version(), t.shape()};
}

void save_output(Node& node, const Tensor& out) {
  if (node.saves_output) return;
  node.saves_output = true;
  node.output_storage = out.impl().storage;
  node.output_version = out.version();
}

Tensor attach(Tensor out, const char* op, std::initializer_list<Tensor> inputs,
              const std::source_location& where, Node*& raw) {
  if (inputs.size() > static_cast<std::size_t>(kMaxInputs))
    throw GraphError(std::string("record: '") + op + "' has " + std::to_string(inputs.size()) +
                     " inputs; a node holds at most " + std::to_string(kMaxInputs));
  auto node = make_node();
  raw = node.get();
  node->op = op;
  node->where = where;
  int i = 0;
  for (const Tensor& t : inputs) {
    Edge& e = node->next[i++];
    if (!t.defined() || !t.requires_grad()) continue;
    e.shape = t.shape();
    e.dtype = t.dtype();
    if (t.is_leaf())
      e.leaf = t.impl_ptr();
    else
      e.node = t.impl().grad_fn;
  }
  node->num_inputs = i;
  node->output_shape = out.shape();
  node->output_dtype = out.dtype();
  // A fresh output (the usual case) is marked in place; one the op returned from elsewhere (a
  // view of its input, say) gets its own impl, so other handles to it stay untouched.
  if (out.impl_ptr().use_count() == 1 && out.is_leaf() && !out.requires_grad()) {
    out.impl().requires_grad = true;
    out.impl().grad_fn = std::move(node);
    return out;
  }
  auto impl = detail::make_pooled<TensorImpl>();
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

// Guards a leaf's .grad() while a pass commits into it; leaves hash to one of 64 locks.
std::mutex& leaf_lock(const TensorImpl* leaf) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<std::uintptr_t>(leaf) >> 6) % 64];
}

// Refuses to run a derivative on tensors written in place since the op saved them.
void check_versions(const Node& n) {
  auto fail = [&](const Shape& shape, uint64_t then, uint64_t now) {
    throw GraphError(std::string("backward of '") + n.op + "' (recorded at " + where_str(n) +
                     "): a tensor it saved, of shape " + shape.str() +
                     ", was modified in place since (version " + std::to_string(then) +
                     ", now " + std::to_string(now) +
                     "); its gradient would be wrong. Run backward before changing it (an "
                     "optimizer step, a write through data<T>() or set()), or change a clone");
  };
  for (int i = 0; i < n.num_saved; ++i) {
    const SavedVersion& v = n.saved[i];
    if (v.storage->version() != v.version) fail(v.shape, v.version, v.storage->version());
  }
  if (n.saves_output && n.output_storage->version() != n.output_version)
    fail(n.output_shape, n.output_version, n.output_storage->version());
}

// Runs a node's derivative: its kernel when no graph is being built and it has one, else its
// formula (recorded when create_graph). An error from it is rethrown, same type, naming the
// forward op and the user's line that recorded the node.
Grads call_backward(Node& n, const Tensor& dY, const Tensor& Y, bool create_graph) {
  auto where = [&](const char* what) {
    const std::string m = what;
    if (m.find(" (in the backward of '") != std::string::npos) return m;
    return m + " (in the backward of '" + n.op + "', recorded at " + where_str(n) + ")";
  };
  check_versions(n);
  const bool use_kernel = n.kernel && (!create_graph || !n.formula);
  if (create_graph && !n.formula)
    throw GraphError(std::string("backward: '") + n.op + "' (recorded at " + where_str(n) +
                     ") is not twice differentiable: it has a kernel but no formula in ops, so "
                     "create_graph cannot record its backward");
  try {
    return use_kernel ? n.kernel(dY, Y) : n.formula(dY, Y);
  } catch (const ShapeError& e) {
    throw ShapeError(where(e.what()));
  } catch (const ValueError& e) {
    throw ValueError(where(e.what()));
  } catch (const GraphError& e) {
    throw GraphError(where(e.what()));
  } catch (const IoError& e) {
    throw IoError(where(e.what()));
  }
}

// Adds g into the slot (undefined means zero so far): the engine's own kernel, in place when
// the slot's buffer is the pass's alone, else into a fresh one; under create_graph the sum is
// recorded (its formula passes the gradient through to both sides).
void accumulate(Tensor& slot, const Tensor& g, bool create_graph) {
  if (!slot.defined()) {
    slot = g;
    return;
  }
  const bool in_place = !create_graph && slot.impl_ptr().use_count() == 1 &&
                        slot.impl().storage.use_count() == 1;
  Tensor sum = in_place ? slot : Tensor(slot.shape(), slot.dtype());
  dispatch(slot.dtype(), [&]<class T>() {
    const T* a = std::as_const(slot).data<T>();
    const T* b = g.data<T>();
    T* c = sum.data<T>();
    const int64_t n = slot.numel();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  });
  if (create_graph)
    sum = record("accumulate", sum, {slot, g}).formula([](const Tensor& dY) -> Grads {
      return {dY, dY};
    });
  slot = std::move(sum);
}

// What one backward pass keeps: a state for each node it reaches and each leaf it feeds, and its
// work lists. One per thread, kept with their capacity, so the passes of a steady loop allocate
// nothing. (A backward inside a derivative is refused, so a thread runs one pass at a time.)
struct NodeState {
  Node* node;
  Tensor grad;         // the summed incoming gradient
  int waiting = 0;     // consumers still to come
  bool needed = true;  // leads to a gradient we were asked for
  int capture = -1;    // index of the non-leaf input whose gradient this node receives
};
struct LeafState {
  TensorImpl* leaf;
  Tensor grad;     // staged: committed to .grad() when the pass succeeds
  int input = -1;  // index among tg::grad's inputs, or -1
  int uses = 0;    // with a GradReadyScope: edges into this leaf whose node has not run yet
  bool told = false;  // the GradReadyScope's callback ran for this leaf
};
struct Workspace {
  std::vector<NodeState> nodes;
  std::vector<LeafState> leaves;  // sorted by address once discovered
  std::vector<Node*> roots, stack, ready, order;
  std::vector<int> waiting;
  std::vector<Tensor> seeds;
};
thread_local Workspace workspace;
thread_local bool running = false;
thread_local const GradReadyFn* ready_callback = nullptr;  // the newest GradReadyScope's callback
thread_local GradReadyScope* newest_scope = nullptr;

// One backward pass. Each reached node's state is found through Node::slot, valid while the
// pass owns the node (Node::owner): a second thread's pass through the same nodes is refused.
class Run {
 public:
  explicit Run(const char* who) : w_(&workspace) {
    if (running)
      throw GraphError(std::string(who) +
                       ": called inside a derivative (a backward closure) or a GradReadyScope "
                       "callback; those compute with ops or directly, they may not run a "
                       "backward");
    running = true;
  }
  ~Run() {
    for (NodeState& st : w_->nodes) {
      st.node->slot = -1;
      st.node->owner.store(nullptr, std::memory_order_release);
    }
    clear_keeping_small(w_->nodes);
    clear_keeping_small(w_->leaves);
    clear_keeping_small(w_->seeds);
    clear_keeping_small(w_->roots);
    clear_keeping_small(w_->stack);
    clear_keeping_small(w_->ready);
    clear_keeping_small(w_->order);
    clear_keeping_small(w_->waiting);
    running = false;
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  Workspace& work() { return *w_; }
  NodeState& state(Node* n) { return w_->nodes[n->slot]; }
  bool reached(const Node* n) const {
    return n->slot >= 0 && n->slot < static_cast<int>(w_->nodes.size()) &&
           w_->nodes[n->slot].node == n;
  }
  // The state of a leaf this pass feeds (or that is an output); null for any other tensor.
  LeafState* leaf(TensorImpl* t) {
    auto it = std::lower_bound(
        w_->leaves.begin(), w_->leaves.end(), t,
        [](const LeafState& s, TensorImpl* p) { return std::less<>()(s.leaf, p); });
    return it != w_->leaves.end() && it->leaf == t ? &*it : nullptr;
  }

  // Finds every node reachable from the roots, counts its consumers, and gives every leaf they
  // feed (and the leaf outputs) a state; throws before any work when the graph was freed by an
  // earlier backward.
  void discover(std::span<const Tensor> outputs) {
    std::vector<Node*>& stack = w_->stack;
    for (const Tensor& y : outputs) {
      if (y.is_leaf()) {
        add_leaf(y.impl_ptr().get());
        continue;
      }
      Node* r = y.impl().grad_fn.get();
      w_->roots.push_back(r);
      if (visit(r)) stack.push_back(r);
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->released)
        throw GraphError(std::string("backward: the graph through '") + n->op + "' (recorded at " +
                         where_str(*n) +
                         ") was freed by an earlier backward; pass retain_graph=true to the "
                         "first backward to go through it twice");
      for (int i = 0; i < n->num_inputs; ++i) {
        const Edge& e = n->next[i];
        if (e.leaf) add_leaf(e.leaf.get());
        Node* c = e.node.get();
        if (!c) continue;
        const bool fresh = visit(c);
        ++state(c).waiting;
        if (fresh) stack.push_back(c);
      }
    }
    sort_leaves();
  }

  // For tg::grad: marks the nodes on a path to a requested input; the rest never run.
  void mark_needed() {
    // Kahn's order puts every consumer before what it consumes; walk it backwards.
    std::vector<int>& waiting = w_->waiting;
    waiting.resize(w_->nodes.size());
    for (std::size_t i = 0; i < w_->nodes.size(); ++i) waiting[i] = w_->nodes[i].waiting;
    std::vector<Node*>&order = w_->order, &ready = w_->stack;
    order.clear();
    ready.clear();
    for (Node* r : w_->roots)
      if (waiting[r->slot] == 0 && std::find(ready.begin(), ready.end(), r) == ready.end())
        ready.push_back(r);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      order.push_back(n);
      for (int i = 0; i < n->num_inputs; ++i)
        if (Node* c = n->next[i].node.get(); c && --waiting[c->slot] == 0) ready.push_back(c);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      NodeState& st = state(*it);
      bool needed = st.capture >= 0;
      for (int i = 0; i < (*it)->num_inputs && !needed; ++i) {
        const Edge& e = (*it)->next[i];
        needed = (e.leaf && leaf(e.leaf.get())->input >= 0) ||
                 (e.node && state(e.node.get()).needed);
      }
      st.needed = needed;
    }
  }

  void execute(bool retain_graph, bool create_graph, std::vector<Tensor>* captured) {
    GradModeGuard mode(create_graph);
    std::vector<Node*>& ready = w_->ready;
    ready.clear();
    for (Node* r : w_->roots)
      if (state(r).waiting == 0 && state(r).needed &&
          std::find(ready.begin(), ready.end(), r) == ready.end())
        ready.push_back(r);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      NodeState& s = state(n);
      Tensor dY = std::move(s.grad);
      if (s.capture >= 0 && dY.defined()) (*captured)[s.capture] = dY;
      Grads grads;
      if (dY.defined() && s.needed) {
        Tensor Y;
        if (n->saves_output) {
          auto impl = detail::make_pooled<TensorImpl>();
          impl->shape = n->output_shape;
          impl->dtype = n->output_dtype;
          impl->storage = n->output_storage;
          impl->requires_grad = true;
          impl->grad_fn = n->shared_from_this();
          Y = Tensor(std::move(impl));
        }
        grads = call_backward(*n, dY, Y, create_graph);
      }
      if (!retain_graph && s.needed) n->release();
      for (int i = 0; i < n->num_inputs; ++i) {
        const Edge& e = n->next[i];
        if (!e.active()) continue;
        const Tensor& g = grads[i];
        if (g.defined() && (g.shape() != e.shape || g.dtype() != e.dtype))
          throw GraphError(std::string("backward of '") + n->op + "' (recorded at " +
                           where_str(*n) + ") returned a gradient of shape " + g.shape().str() +
                           " " + dtype_name(g.dtype()) + " for input " + std::to_string(i) +
                           " of shape " + e.shape.str() + " " + dtype_name(e.dtype));
        if (e.leaf) {
          if (!g.defined() && !on_ready_) continue;
          LeafState* l = leaf(e.leaf.get());
          if (g.defined()) accumulate(l->grad, g, create_graph);
          if (on_ready_ && --l->uses == 0) tell_ready(e.leaf, *l);
          continue;
        }
        NodeState& c = state(e.node.get());
        if (!c.needed) continue;
        if (g.defined()) accumulate(c.grad, g, create_graph);
        if (--c.waiting == 0) ready.push_back(e.node.get());
      }
    }
  }

  // For a GradReadyScope: counts each leaf's uses, so that execute() can tell when the last one
  // has sent its part. Only backward() calls this (tg::grad commits nothing).
  void watch_leaves(const GradReadyFn* fn) {
    on_ready_ = fn;
    for (const NodeState& st : w_->nodes)
      for (int i = 0; i < st.node->num_inputs; ++i)
        if (const Edge& e = st.node->next[i]; e.leaf) ++leaf(e.leaf.get())->uses;
  }
  // A leaf whose every use has run: its staged gradient is final for this pass.
  void tell_ready(const std::shared_ptr<TensorImpl>& t, LeafState& l) {
    if (!on_ready_ || l.told || !l.grad.defined() || !t->requires_grad) return;
    l.told = true;
    (*on_ready_)(Tensor(t), l.grad);
  }

 private:
  // Notes a leaf the pass feeds. A leaf used by many nodes is noted many times: the list is
  // made unique whenever it has doubled, so it stays within twice the distinct leaves.
  void add_leaf(TensorImpl* t) {
    w_->leaves.push_back(LeafState{t, Tensor(), -1});
    if (w_->leaves.size() >= unique_bound_) {
      sort_leaves();
      unique_bound_ = 2 * w_->leaves.size() + 64;
    }
  }
  void sort_leaves() {
    auto& leaves = w_->leaves;
    std::sort(leaves.begin(), leaves.end(), [](const LeafState& a, const LeafState& b) {
      return std::less<>()(a.leaf, b.leaf);
    });
    leaves.erase(std::unique(leaves.begin(), leaves.end(),
                             [](const LeafState& a, const LeafState& b) { return a.leaf == b.leaf; }),
                 leaves.end());
  }
  // Gives n a state in this pass; false when it already had one. Throws GraphError when another
  // thread's pass owns n.
  bool visit(Node* n) {
    const void* owner = nullptr;
    if (!n->owner.compare_exchange_strong(owner, w_, std::memory_order_acq_rel)) {
      if (owner == w_) return false;
      throw GraphError(std::string("backward: another thread is running a backward through '") +
                       n->op + "' (recorded at " + where_str(*n) +
                       "); backwards through one graph cannot run at once: give each thread "
                       "its own forward, or wait for the other backward");
    }
    w_->nodes.push_back(NodeState{n, Tensor(), 0, true, -1});
    n->slot = static_cast<int>(w_->nodes.size()) - 1;
    return true;
  }

  Workspace* w_;
  std::size_t unique_bound_ = 64;
  const GradReadyFn* on_ready_ = nullptr;
};

std::vector<Tensor> run_backward(std::span<const Tensor> outputs,
                                 std::span<const Tensor> grad_outputs, bool retain_graph,
                                 bool create_graph, const std::vector<Tensor>* inputs,
                                 const char* who) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw ValueError(std::string(who) + ": " + std::to_string(outputs.size()) + " outputs but " +
                     std::to_string(grad_outputs.size()) + " grad_outputs");
  Run run(who);
  Workspace& w = run.work();
  std::vector<Tensor>& seeds = w.seeds;
  seeds.resize(outputs.size());
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& y = outputs[k];
    if (!y.defined()) throw ValueError(std::string(who) + ": an output is an undefined tensor");
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

  run.discover(outputs);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k].is_leaf())
      accumulate(run.leaf(outputs[k].impl_ptr().get())->grad, seeds[k], create_graph);
    else
      accumulate(run.state(outputs[k].impl().grad_fn.get()).grad, seeds[k], create_graph);
  }

  std::vector<Tensor> captured;
  if (inputs) {
    captured.resize(inputs->size());
    for (std::size_t i = 0; i < inputs->size(); ++i) {
      const Tensor& x = (*inputs)[i];
      if (x.is_leaf()) {
        if (LeafState* l = run.leaf(x.impl_ptr().get())) l->input = static_cast<int>(i);
      } else {
        // An input that does not lie below the outputs keeps a zero gradient.
        if (Node* n = x.impl().grad_fn.get(); run.reached(n))
          run.state(n).capture = static_cast<int>(i);
      }
    }
    run.mark_needed();
  }
  if (!inputs && ready_callback) run.watch_leaves(ready_callback);
  run.execute(retain_graph, create_graph, inputs ? &captured : nullptr);
  // A leaf that is itself an output has no use below the outputs: its seed is its gradient.
  if (!inputs && ready_callback)
    for (const Tensor& y : outputs)
      if (y.is_leaf()) run.tell_ready(y.impl_ptr(), *run.leaf(y.impl_ptr().get()));

  if (inputs) {
    for (std::size_t i = 0; i < inputs->size(); ++i) {
      const Tensor& x = (*inputs)[i];
      if (x.is_leaf())
        if (LeafState* l = run.leaf(x.impl_ptr().get()); l && l->grad.defined())
          captured[i] = l->grad;
      if (!captured[i].defined()) captured[i] = zeros(x.shape(), x.dtype());
    }
    return captured;
  }
  // Commit the staged leaf gradients only now: an error above leaves every .grad() untouched.
  GradModeGuard mode(create_graph);
  for (LeafState& l : w.leaves) {
    if (!l.grad.defined() || !l.leaf->requires_grad) continue;
    std::lock_guard lock(leaf_lock(l.leaf));  // threads may share a leaf (a model's parameters)
    auto& slot = l.leaf->grad;
    if (!slot) {
      // g may share its buffer with a tensor the caller holds (grad_output, or a view of it):
      // then .grad() gets a copy, unless create_graph needs g's own place on the tape.
      const Tensor& g = l.grad;
      const bool owned = g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1;
      slot = (owned || (create_graph && !g.is_leaf()) ? g : g.clone()).impl_ptr();
      continue;
    }
    // In place only when nobody else sees the buffer: a .grad() handle the user kept, or a
    // recorded gradient, keeps its values (PyTorch's rule); then the sum goes to a new buffer.
    Tensor sum(slot);
    const bool own = !create_graph && !slot->grad_fn && slot.use_count() == 2 &&
                     slot->storage.use_count() == 1;
    if (own) {
      dispatch(sum.dtype(), [&]<class T>() {
        T* a = sum.data<T>();
        const T* b = std::as_const(l.grad).data<T>();
        const int64_t n = sum.numel();
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) a[i] += b[i];
      });
      continue;
    }
    accumulate(sum, l.grad, create_graph);
    slot = sum.impl_ptr();
  }
  return {};
}

}  // namespace

GradReadyScope::GradReadyScope(GradReadyFn on_ready)
    : fn_(std::move(on_ready)), older_(newest_scope) {
  if (older_) older_->newer_ = this;
  newest_scope = this;
  ready_callback = fn_ ? &fn_ : nullptr;
}

GradReadyScope::~GradReadyScope() {
  if (older_) older_->newer_ = newer_;
  if (newer_) {
    newer_->older_ = older_;
    return;  // a newer scope is still in charge
  }
  newest_scope = older_;
  ready_callback = older_ && older_->fn_ ? &older_->fn_ : nullptr;
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  // A recorded backward refers back to the forward nodes, so create_graph keeps the graph.
  run_backward(std::span(this, 1), std::span(&grad_output, 1), retain_graph || create_graph,
               create_graph, nullptr, "backward");
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
