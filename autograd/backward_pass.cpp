// The backward pass. run_backward (near the end) takes its steps in order: make_seeds, discover,
// plant_seeds, mark_needed (tg::grad), execute, then input_grads (tg::grad) or commit. Every walk
// keeps its own stack, no recursion: a chain of a million ops is fine.
//
// A checkpointed region (ops/checkpoint.h) is one node with edges to everything its graph read
// from outside, and no derivative. When execute reaches it, splice records the region again from
// the inputs it kept and puts the new graph in its place: the new nodes join the pass, the edges'
// nodes wait for them instead, and the region's gradient seeds the new output. The pass then runs
// as if the region had been recorded once (the same order, so the same sums, bit for bit), and no
// backward runs inside another.

#include <algorithm>
#include <utility>

#include <tapegrad/autograd/engine.h>

namespace tg {
namespace detail {
namespace {

// What one backward pass keeps: a state for each node it reaches and each leaf it feeds, and its
// work lists. One per thread, kept with their capacity, so the passes of a steady loop allocate
// nothing. (A backward inside a derivative is refused, so a thread runs one pass at a time.)
struct NodeState {
  Node* node;
  std::shared_ptr<TensorImpl> grad;  // the summed incoming gradient
  int waiting = 0;     // consumers still to come
  bool needed = true;  // leads to a gradient we were asked for
  int capture = -1;    // index of the non-leaf input whose gradient this node receives
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

// One backward pass. Each reached node's state is found through Node::slot, valid while the
// pass owns the node (Node::owner): a second thread's pass through the same nodes is refused.
class Pass {
 public:
  explicit Pass(const BackwardCall& call)
      : call_(call), w_(&workspace), on_ready_(call.inputs ? nullptr : grad_ready_callback()) {
    if (running)
      throw GraphError(std::string(call.who()) +
                       ": called inside a derivative (a backward closure) or a GradReadyScope "
                       "callback; those compute with ops or directly, they may not run a "
                       "backward");
    running = true;
  }
  ~Pass() {
    for (NodeState& st : w_->nodes) {
      st.node->slot = -1;
      st.node->owner.store(nullptr, std::memory_order_release);
    }
    clear_keeping_small(w_->nodes);
    clear_keeping_small(w_->leaves);
    clear_keeping_small(w_->seeds);
    for (auto* list : {&w_->roots, &w_->stack, &w_->ready, &w_->order}) clear_keeping_small(*list);
    clear_keeping_small(w_->waiting);
    running = false;
  }
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // Checks the outputs and makes their seeds: the grad_output, or ones for a scalar.
  void make_seeds() {
    const std::string who = call_.who();
    w_->seeds.resize(call_.outputs.size());
    for (std::size_t k = 0; k < call_.outputs.size(); ++k) {
      const Tensor& y = call_.outputs[k];
      if (!y.defined()) throw ValueError(who + ": an output is an undefined tensor");
      if (!y.requires_grad())
        throw GraphError(who + ": output of shape " + y.shape().str() +
                         " does not require grad (no input that requires grad reaches it, or it "
                         "was made under NoGradGuard)");
      if (k < call_.grad_outputs.size() && call_.grad_outputs[k].defined()) {
        const Tensor& g = call_.grad_outputs[k];
        if (g.shape() != y.shape())
          throw ShapeError(who + ": grad_output of shape " + g.shape().str() +
                           " does not match output of shape " + y.shape().str());
        if (g.dtype() != y.dtype())
          throw ValueError(who + ": grad_output is " + dtype_name(g.dtype()) +
                           " but the output is " + dtype_name(y.dtype()));
        w_->seeds[k] = g;
      } else if (y.numel() == 1) {
        w_->seeds[k] = ones(y.shape(), y.dtype());
      } else {
        throw GraphError(who + ": output of shape " + y.shape().str() +
                         " is not a scalar; pass a grad_output of that shape");
      }
    }
  }

  // Finds every node reachable from the outputs, counts its consumers, and notes every leaf they
  // feed (and the leaf outputs), with a GradReadyScope also each leaf's uses; throws before any
  // work when an earlier backward freed the graph.
  void discover() {
    std::vector<Node*>& stack = w_->stack;
    for (const Tensor& y : call_.outputs) {
      if (y.is_leaf()) {
        note_leaf(y.impl_ptr().get());
      } else if (Node* r = y.impl().grad_fn.get(); visit(r)) {
        w_->roots.push_back(r);
        stack.push_back(r);
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->released) throw freed(*n);
      for (const Edge& e : n->edges()) {
        if (TensorImpl* l = e.leaf()) note_leaf(l);
        Node* c = e.node();
        if (!c) continue;
        const bool fresh = visit(c);
        ++state(c).waiting;
        if (fresh) stack.push_back(c);
      }
    }
    sort_leaves();
    if (on_ready_)
      for (const NodeState& st : w_->nodes)
        for (const Edge& e : st.node->edges())
          if (TensorImpl* l = e.leaf()) ++leaf(l)->uses;
  }

  // Each output's seed is its first gradient (a tensor given twice gets both).
  void plant_seeds() {
    for (std::size_t k = 0; k < call_.outputs.size(); ++k) {
      const Tensor& y = call_.outputs[k];
      std::shared_ptr<TensorImpl>& slot =
          y.is_leaf() ? leaf(y.impl_ptr().get())->grad : state(y.impl().grad_fn.get()).grad;
      accumulate_grad(slot, w_->seeds[k], call_.create_graph);
    }
  }

  // For tg::grad: notes where each input's gradient will arrive (an input that does not lie below
  // the outputs keeps a zero gradient), then marks the nodes on a path to one; the rest never run.
  void mark_needed() {
    const std::vector<Tensor>& inputs = *call_.inputs;
    captured_.resize(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].is_leaf()) {
        if (LeafState* l = leaf(inputs[i].impl_ptr().get())) l->input = static_cast<int>(i);
      } else if (Node* n = inputs[i].impl().grad_fn.get(); reached(n)) {
        state(n).capture = static_cast<int>(i);
      }
    }
    // Kahn's order puts every consumer before what it consumes; walk it backwards.
    std::vector<int>& waiting = w_->waiting;
    waiting.resize(w_->nodes.size());
    for (std::size_t i = 0; i < w_->nodes.size(); ++i) waiting[i] = w_->nodes[i].waiting;
    std::vector<Node*>&order = w_->order, &ready = w_->stack;
    for (Node* r : w_->roots)
      if (waiting[r->slot] == 0) ready.push_back(r);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      order.push_back(n);
      for (const Edge& e : n->edges())
        if (Node* c = e.node(); c && --waiting[c->slot] == 0) ready.push_back(c);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      NodeState& st = state(*it);
      bool needed = st.capture >= 0;
      for (const Edge& e : (*it)->edges())
        needed = needed || (e.leaf() && leaf(e.leaf())->input >= 0) ||
                 (e.node() && state(e.node()).needed);
      st.needed = needed;
    }
  }

  // Runs each needed node once all its consumers have sent their gradients.
  void execute() {
    GradModeGuard mode(call_.create_graph);
    std::vector<Node*>& ready = w_->ready;
    for (Node* r : w_->roots)
      if (state(r).waiting == 0 && state(r).needed) ready.push_back(r);
    while (!ready.empty()) {
      Node* n = ready.back();
      ready.pop_back();
      // dY lives until n's gradients are sent: who holds a buffer decides where the sums go.
      Tensor dY(std::move(state(n).grad));
      if (n->hooks() && dY.defined()) dY = run_hooks(*n->hooks(), dY, "the output of " + op_at(*n));
      if (n->recompute())
        splice(*n, dY);
      else
        send(*n, run(*n, dY));
    }
    // A leaf that is itself an output has no use below the outputs: its seed is its gradient.
    for (const Tensor& y : call_.outputs)
      if (y.is_leaf()) tell_ready(y.impl_ptr(), *leaf(y.impl_ptr().get()));
  }

  // tg::grad's answer: each input's gradient, zeros (or undefined, PyTorch's None for the
  // functional API) where none arrived.
  std::vector<Tensor> input_grads() {
    const std::vector<Tensor>& inputs = *call_.inputs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& x = inputs[i];
      if (LeafState* l = x.is_leaf() ? leaf(x.impl_ptr().get()) : nullptr; l && l->grad)
        captured_[i] = Tensor(hooked(*l));
      if (!captured_[i].defined() && call_.zeros_for_unused)
        captured_[i] = zeros(x.shape(), x.dtype());
    }
    return std::move(captured_);
  }

  // Commits the staged leaf gradients only now: an error above leaves every .grad() untouched.
  void commit() {
    for (LeafState& l : w_->leaves) hooked(l);
    const RecordingWithin within(call_.who(), call_.where);
    commit_leaf_grads(w_->leaves, call_.create_graph);
  }

 private:
  NodeState& state(const Node* n) { return w_->nodes[n->slot]; }
  bool reached(const Node* n) const { return n->owner.load(std::memory_order_acquire) == w_; }

  // Gives n a state in this pass; false when it already had one. Throws GraphError when another
  // thread's pass owns n.
  bool visit(Node* n) {
    const void* owner = nullptr;
    if (!n->owner.compare_exchange_strong(owner, w_, std::memory_order_acq_rel)) {
      if (owner == w_) return false;
      throw GraphError("backward: another thread is running a backward through " + op_at(*n) +
                       "; backwards through one graph cannot run at once: give each thread its "
                       "own forward, or wait for the other backward");
    }
    w_->nodes.push_back(NodeState{n, nullptr});
    n->slot = static_cast<int>(w_->nodes.size()) - 1;
    return true;
  }

  // Notes a leaf the pass feeds. A leaf used by many nodes is noted many times: the list is made
  // unique whenever it has doubled, so it stays within twice the distinct leaves.
  void note_leaf(TensorImpl* t) {
    w_->leaves.push_back(LeafState{t, nullptr});
    if (w_->leaves.size() >= unique_bound_) {
      sort_leaves();
      unique_bound_ = 2 * w_->leaves.size() + 64;
    }
  }
  void sort_leaves() {
    std::ranges::sort(w_->leaves, {}, &LeafState::leaf);
    const auto repeats = std::ranges::unique(w_->leaves, {}, &LeafState::leaf);
    w_->leaves.erase(repeats.begin(), repeats.end());
  }
  // The state of a leaf this pass feeds (or that is an output); null for any other tensor.
  LeafState* leaf(TensorImpl* t) {
    auto it = std::ranges::lower_bound(w_->leaves, t, {}, &LeafState::leaf);
    return it != w_->leaves.end() && it->leaf == t ? &*it : nullptr;
  }

  // Runs n's derivative on dY, its summed incoming gradient (unless none came, or tg::grad needs
  // nothing below n), then frees what n kept for it unless the graph is retained.
  Grads run(Node& n, const Tensor& dY) {
    const NodeState& s = capture(n, dY);
    Grads grads = dY.defined() && s.needed ? call_backward(n, dY, call_.create_graph) : Grads{};
    if (!call_.retain_graph && s.needed) n.release();
    return grads;
  }

  // For tg::grad with respect to n's output: dY is that input's gradient.
  const NodeState& capture(const Node& n, const Tensor& dY) {
    const NodeState& s = state(&n);
    if (s.capture >= 0 && dY.defined()) captured_[s.capture] = dY;
    return s;
  }

  static GraphError freed(const Node& n) {
    return GraphError("backward: the graph through " + op_at(n) + " was freed by an earlier "
                      "backward; pass retain_graph=true to the first backward to go through it "
                      "twice");
  }

  // Adds each input's gradient into its state; an input node that has now heard from all its
  // consumers is ready. (A region's node that got no gradient sends none, to its many edges.)
  void send(const Node& n, const Grads& grads) {
    const RecordingWithin within(n);  // the sums create_graph records
    const std::span<const Edge> edges = n.edges();
    static const Tensor none;
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.active()) continue;
      const Tensor& g = n.recompute() ? none : grads[i];
      if (g.defined()) check_fits(n, i, g);
      if (TensorImpl* t = e.leaf()) {
        if (!g.defined() && !on_ready_) continue;
        LeafState* l = leaf(t);
        if (g.defined()) accumulate_grad(l->grad, g, call_.create_graph);
        if (on_ready_ && --l->uses == 0) tell_ready(e.leaf_ptr(), *l);
        continue;
      }
      NodeState& c = state(e.node());
      if (!c.needed) continue;
      if (g.defined()) accumulate_grad(c.grad, g, call_.create_graph);
      if (--c.waiting == 0) w_->ready.push_back(e.node());
    }
  }

  // A checkpointed region's node n with gradient dY (see the top of this file): records the
  // region again, counts the new graph's consumers, and moves n's edges under it.
  void splice(Node& n, const Tensor& dY) {
    capture(n, dY);
    if (!dY.defined()) return send(n, Grads{});
    if (!n.recompute()->run) throw freed(n);
    std::vector<Node*> made;  // the nodes the recomputation records
    {
      NodeCollector collect(made);
      GradModeGuard on(true);
      recomputed_.push_back(n.recompute()->run());  // keeps the new graph alive for the pass
    }
    const Tensor& y = recomputed_.back();
    Node* root = y.impl().grad_fn.get();
    if (root == nullptr) {  // fn's output depends on nothing that requires grad
      if (y.requires_grad())
        throw GraphError("backward: recomputing " + op_at(n) + " returned a tensor it did not "
                         "make, unlike its forward (fn records another graph each time it runs)");
      return send(n, Grads{});
    }
    std::ranges::sort(made);
    discover_region(n, root, made);
    // n's edges now wait for the new nodes instead of n (an edge fn read but no path to its output
    // took gets nothing, as from an op that returns no gradient for an input).
    for (const Edge& e : n.recompute()->edges) {
      if (Node* c = e.node()) {
        if (NodeState& st = state(c); --st.waiting == 0 && st.needed) w_->ready.push_back(c);
      } else if (LeafState* l = leaf(e.leaf()); on_ready_ && --l->uses == 0) {
        tell_ready(e.leaf_ptr(), *l);
      }
    }
    accumulate_grad(state(root).grad, dY, call_.create_graph);
    w_->ready.push_back(root);
    if (!call_.retain_graph) n.release();
  }

  // Discovers region n's new nodes (`made`, sorted) from root down, counting their consumers: an
  // edge out of them must be one of n's (which holds every tensor requiring grad fn read, so
  // maybe more).
  void discover_region(const Node& n, Node* root, const std::vector<Node*>& made) {
    const auto check_edge = [&](const Edge& e) {
      for (const Edge& m : n.recompute()->edges)
        if (m == e) return;
      throw GraphError("backward: recomputing " + op_at(n) + " read a tensor its forward did not "
                       "read (fn records another graph each time it runs)");
    };
    std::vector<Node*>& stack = w_->stack;
    visit(root);
    stack.push_back(root);
    while (!stack.empty()) {
      Node* m = stack.back();
      stack.pop_back();
      for (const Edge& e : m->edges()) {
        Node* c = e.node();
        if (!e.active()) continue;
        if (c && std::ranges::binary_search(made, c)) {
          if (visit(c)) stack.push_back(c);
          ++state(c).waiting;
          continue;
        }
        check_edge(e);
        if (c)
          ++state(c).waiting;
        else if (on_ready_)
          ++leaf(e.leaf())->uses;
      }
    }
  }

  // Refuses a gradient g for input i of n that is not of the input's shape and dtype.
  static void check_fits(const Node& n, int i, const Tensor& g) {
    const Edge& e = n.next(i);
    const TensorImpl* l = e.leaf();
    const Shape& shape = l ? l->shape : e.node()->output_shape;
    const Dtype dtype = l ? l->dtype : e.node()->output_dtype;
    if (g.shape() != shape || g.dtype() != dtype)
      throw GraphError("backward of " + op_at(n) + " returned a gradient of shape " +
                       g.shape().str() + " " + dtype_name(g.dtype()) + " for input " +
                       std::to_string(i) + " of shape " + shape.str() + " " + dtype_name(dtype));
  }

  // A leaf's final gradient for this pass, after its hooks (run once).
  const std::shared_ptr<TensorImpl>& hooked(LeafState& l) {
    if (!l.hooked && l.grad && l.leaf->hooks) {
      GradModeGuard mode(call_.create_graph);
      l.grad = run_hooks(*l.leaf->hooks, Tensor(l.grad), "a leaf of shape " + l.leaf->shape.str())
                   .impl_ptr();
    }
    l.hooked = true;
    return l.grad;
  }

  // A leaf whose every use has run: its staged gradient is final for this pass.
  void tell_ready(const std::shared_ptr<TensorImpl>& t, LeafState& l) {
    if (!on_ready_ || l.told || !l.grad || !t->requires_grad) return;
    l.told = true;
    (*on_ready_)(Tensor(t), Tensor(hooked(l)));
  }

  const BackwardCall& call_;
  Workspace* w_;
  const GradReadyFn* on_ready_;   // backward's GradReadyScope callback, or null
  std::size_t unique_bound_ = 64;
  std::vector<Tensor> captured_;  // tg::grad's: each input's gradient
  std::vector<Tensor> recomputed_;  // the outputs of the regions splice recorded again
};

}  // namespace

void touch_pass_state() { (void)workspace.nodes.size(); }

std::vector<Tensor> run_backward(const BackwardCall& call) {
  if (current_step()) throw_in_static_step((std::string(call.who()) + "()").c_str());
  if (!call.grad_outputs.empty() && call.grad_outputs.size() != call.outputs.size())
    throw ValueError(std::string(call.who()) + ": " + std::to_string(call.outputs.size()) +
                     " outputs but " + std::to_string(call.grad_outputs.size()) + " grad_outputs");
  try {
    Pass pass(call);
    pass.make_seeds();
    pass.discover();
    pass.plant_seeds();
    if (call.inputs) pass.mark_needed();
    pass.execute();
    if (call.inputs) return pass.input_grads();
    pass.commit();
    return {};
  } catch (const MemoryError&) {
    throw;
  } catch (const std::bad_alloc&) {  // the pass's own lists, a derivative's temporaries
    throw MemoryError("%s: out of memory (the graph's gradients, or the pass's lists of its "
                      "nodes); every .grad() is as it was", call.who());
  }
}

}  // namespace detail

}  // namespace tg
