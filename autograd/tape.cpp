// A node's life: an op records it (attach, save, save_output), the backward pass runs its
// derivative (call_backward, which holds it to the derivative contract), and it is freed.

#include <algorithm>
#include <new>
#include <utility>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/pool.h>

namespace tg {

namespace {

// Deleting a node drops its edges and closures, which may drop the last reference to the next
// node, and so on down a chain: plain recursion would overflow the stack on a long chain. So a
// node whose last reference goes (an edge of a dying node, a dying tensor's grad_fn) joins a
// list that the outermost release drains in a loop. The list runs through the nodes themselves
// (Node::release_next) from a head on the draining frame's stack: joining it needs no memory, so
// a MemoryError's unwinding frees a chain of any length in a loop too, and the thread keeps no
// state with a destructor (a thread's first release may come when memory is gone).
thread_local std::shared_ptr<Node>* draining_head = nullptr;  // the running drain's list

// Lets go of a node: when this is its last reference, into the running drain's list, or the
// node starts a drain of its own here; else the count only drops. (A count another thread drops
// at the same moment may still make the reset here the last: then ~Node runs here, and what it
// releases joins this thread's drain, or drains at once: a constant depth either way.)
void release_node(std::shared_ptr<Node>& n) noexcept {
  if (!n) return;
  if (n.use_count() != 1) {
    n.reset();
    return;
  }
  if (draining_head) {
    n->release_next = std::move(*draining_head);
    *draining_head = std::move(n);
    return;
  }
  std::shared_ptr<Node> head = std::move(n);
  draining_head = &head;
  while (head) {
    std::shared_ptr<Node> next = std::move(head);
    head = std::move(next->release_next);
    next.reset();  // ~Node: what it held last joins the list
  }
  draining_head = nullptr;
}

thread_local const detail::RecordingWithin* innermost_within = nullptr;
thread_local std::vector<Node*>* innermost_collector = nullptr;
thread_local std::vector<Edge>* innermost_reads = nullptr;
thread_local bool formula_only = false;

// The edge to t, a tensor that requires grad: its node, or t itself for a leaf.
Edge edge_to(const Tensor& t) {
  return t.is_leaf() ? Edge(t.impl_ptr()) : Edge(t.impl().grad_fn);
}

// "recorded at model.cpp:12", or "recorded within the backward of 'softmax' at model.cpp:12".
std::string recorded_str(const Node& n) {
  const std::string in = n.within ? std::string("within the backward of '") + n.within + "' " : "";
  return "recorded " + in + "at " + n.where.file_name() + ":" + std::to_string(n.where.line());
}

// Runs n's derivative f; an error from it is rethrown, same type, naming the forward op and the
// user's line that recorded n. (The gradients are returned in place: no copies of Grads.)
Grads run_derivative(const Node& n, const BackwardFn& f, const Tensor& dY, const Tensor& Y) {
  auto where = [&](const char* what) {
    const std::string m = what;
    if (m.find(" (in the backward of '") != std::string::npos) return m;
    return m + " (in the backward of '" + n.op + "', " + recorded_str(n) + ")";
  };
  try {
    return f(dY, Y);
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

// A tensor n's derivative reads, on s, for the message: the shape of the input or output on s
// (a leaf's own, an input node's kept output, n's output), else s's size.
std::string saved_str(const Node& n, const Storage& s) {
  if (n.saves_output && n.output_storage.get() == &s) return "of shape " + n.output_shape.str();
  for (const Edge& e : n.edges()) {
    if (const TensorImpl* l = e.leaf(); l && l->storage.get() == &s)
      return "of shape " + l->shape.str();
    if (const Node* c = e.node(); c && c->saves_output && c->output_storage.get() == &s)
      return "of shape " + c->output_shape.str();
  }
  return "of " + std::to_string(s.bytes()) + " bytes";
}

// Refuses to run a derivative on tensors written in place since the op saved them.
void check_versions(const Node& n) {
  auto check = [&](const Storage& s, uint64_t then) {
    if (s.version() == then) return;
    throw GraphError("backward of " + detail::op_at(n) + ": a tensor it saved, " +
                     saved_str(n, s) + ", was modified in place since (version " +
                     std::to_string(then) + ", now " + std::to_string(s.version()) +
                     "); its gradient would be wrong. Run backward before changing it (an "
                     "optimizer step, a write through data<T>() or set()), or change a clone");
  };
  for (int i = 0; i < n.num_saved; ++i) {
    const SavedVersion& v = n.saved(i);
    check(*v.storage, v.version);
  }
  if (n.saves_output) check(*n.output_storage, n.output_version);
}

}  // namespace

Node::~Node() {
  // The closures go in place: the tensors they saved queue their nodes (~TensorImpl).
  for (int i = 0; i < num_inputs; ++i) {
    std::shared_ptr<Node> n = next_[i].take_node();
    release_node(n);
  }
  if (Recompute* r = recompute()) {
    for (Edge& e : r->edges) {
      std::shared_ptr<Node> n = e.take_node();
      release_node(n);
    }
    extras_->recompute.reset();  // the inputs its closure kept release their nodes (~TensorImpl)
  }
  formula.reset();
  kernel.reset();
}

TensorImpl::~TensorImpl() { release_node(grad_fn); }

void Node::reserve_inputs(int n) {
  if (n <= kInlineInputs) return;
  try {
    more_next_ = std::make_unique<Edge[]>(n);
  } catch (const std::bad_alloc&) {
    throw MemoryError("record: out of memory for the inputs of '%s'", op);
  }
  next_ = more_next_.get();
}

void Node::add_saved(const SavedVersion& v) {
  if (num_saved == kMaxSaved)
    throw GraphError(std::string("record: '") + op + "' saves more than " +
                     std::to_string(kMaxSaved) + " tensors");
  if (num_saved == kInlineSaved && !more_saved_) {
    try {
      more_saved_ = std::make_unique<SavedVersion[]>(kMaxSaved - kInlineSaved);
    } catch (const std::bad_alloc&) {
      throw MemoryError("record: out of memory for the tensors '%s' saves", op);
    }
  }
  (num_saved < kInlineSaved ? inline_saved_[num_saved] : more_saved_[num_saved - kInlineSaved]) = v;
  ++num_saved;
}

void Node::clear_for_replay() {
  formula.reset();
  kernel.reset();
  num_saved = 0;
  saves_output = false;
  output_storage.reset();
  released = false;  // a backward without retain_graph through it since: filled in again now
  // A hook registered on its output after the call that made it would not have run in a later
  // eager step (that step's node is another): none carries over. (fn may not register one.)
  if (extras_) {
    extras_->hooks.reset();
    extras_->output_tangent.reset();
  }
}

void Node::release() {
  formula.reset();
  kernel.reset();
  if (Recompute* r = recompute()) r->run = nullptr;  // the kept inputs go; the edges stay
  output_storage.reset();
  if (extras_) extras_->output_tangent.reset();
  released = true;
}

namespace {

// A thread's engine state (the pass's lists, the storage cache, the block pool's releaser)
// registers its destructor with the C runtime on first use, which allocates, and a refused
// registration aborts the process (glibc: "failed to register TLS destructor"), past any catch.
// So it is used early: the main thread's at the program's start, below; another thread's with
// its first node (where memory running out then still aborts: noted in docs/TESTING.md).
void ready_thread_state() {
  static thread_local const bool ready = [] {
    (void)allocator_stats();
    detail::touch_pass_state();
    detail::pool_deallocate(detail::pool_allocate(detail::kPoolGranule), detail::kPoolGranule);
    return true;
  }();
  (void)ready;
}
[[maybe_unused]] const bool kMainThreadReady = (ready_thread_state(), true);

}  // namespace

std::shared_ptr<Node> make_node() {
  ready_thread_state();
  return detail::make_pooled<Node>();
}

namespace detail {

Tensor node_output(std::shared_ptr<Node> node, std::shared_ptr<Storage> storage) {
  auto impl = make_pooled<TensorImpl>();
  impl->shape = node->output_shape;
  impl->dtype = node->output_dtype;
  impl->storage = std::move(storage);
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
  return Tensor(std::move(impl));
}

NodeCollector::NodeCollector(std::vector<Node*>& nodes) : outer_(std::exchange(innermost_collector, &nodes)) {}
NodeCollector::~NodeCollector() { innermost_collector = outer_; }
void NodeCollector::note(Node* n) {
  if (innermost_collector) innermost_collector->push_back(n);
}

ReadCollector::ReadCollector(std::vector<Edge>& edges) : outer_(std::exchange(innermost_reads, &edges)) {}
ReadCollector::~ReadCollector() { innermost_reads = outer_; }
bool ReadCollector::active() { return innermost_reads != nullptr; }
void ReadCollector::note(const InputRefs& inputs) {
  std::vector<Edge>& edges = *innermost_reads;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    Edge e = edge_to(t);
    if (std::none_of(edges.begin(), edges.end(), [&](const Edge& o) { return o == e; }))
      edges.push_back(std::move(e));
  }
}

bool any_requires_grad(const InputRefs& inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) return true;
  return false;
}

void save(Node& node, const Tensor& t) {
  if (!t.defined()) return;
  node.add_saved(SavedVersion{t.impl().storage.get(), t.version()});
}

void save_output(Node& node, const Tensor& out) {
  if (node.saves_output) return;
  node.saves_output = true;
  node.output_storage = out.impl().storage;
  node.output_version = out.version();
}

Tensor attach(Tensor out, const char* op, const InputRefs& inputs,
              const std::source_location& where, Node*& raw) {
  if (inputs.size() > static_cast<std::size_t>(kMaxInputs))
    throw GraphError(std::string("record: '") + op + "' has " + std::to_string(inputs.size()) +
                     " inputs; a node holds at most " + std::to_string(kMaxInputs) +
                     ": record it as two ops, or stack inputs of one shape into one tensor");
  StepTrace* step = current_step();
  if (step && step_replaying(*step)) [[unlikely]]
    return step_replay_attach(*step, std::move(out), op, inputs, raw);
  auto node = make_node();
  node->op = op;
  const int n = static_cast<int>(inputs.size());
  node->reserve_inputs(n);  // may throw: before a collector notes the node
  raw = node.get();
  NodeCollector::note(raw);
  node->where = where;
  if (const RecordingWithin* w = innermost_within) {
    node->where = w->where;
    node->within = w->op;
  }
  for (int i = 0; i < n; ++i) {
    const Tensor& t = inputs[i];
    if (t.defined() && t.requires_grad()) node->next(i) = edge_to(t);
  }
  node->num_inputs = n;
  node->output_shape = out.shape();
  node->output_dtype = out.dtype();
  // A fresh output (the usual case) is marked in place; one the op returned from elsewhere (a
  // view of its input, say) gets its own impl, so other handles to it stay untouched.
  if (out.impl_ptr().use_count() == 1 && out.is_leaf() && !out.requires_grad()) {
    out.impl().requires_grad = true;
    out.impl().grad_fn = std::move(node);
  } else {
    out = node_output(std::move(node), out.impl().storage);
  }
  if (step) [[unlikely]]
    step_note_node(*step, out);
  return out;
}

std::string op_at(const Node& n) { return std::string("'") + n.op + "' (" + recorded_str(n) + ")"; }

RecordingWithin::RecordingWithin(const char* op, const std::source_location& where)
    : op(op), where(where), outer_(innermost_within) {
  innermost_within = this;
}
RecordingWithin::~RecordingWithin() { innermost_within = outer_; }

FormulasOnly::FormulasOnly() : outer_(std::exchange(formula_only, true)) {}
FormulasOnly::~FormulasOnly() { formula_only = outer_; }

// A node's kernel runs when no graph is being built and it has one, else its formula (recorded
// under create_graph).
Grads call_backward(Node& n, const Tensor& dY, bool create_graph) {
  if (!n.formula && !n.kernel)
    throw GraphError("backward: " + op_at(n) + " has no derivative: record(...) was given "
                     "neither .formula(...) nor .kernel(...); give it a formula in tg ops");
  check_versions(n);
  // Forward mode over this backward (a Hessian-vector product) needs the formula's ops, which
  // carry tangents; a kernel computes values only.
  const bool forward = forward_level() != 0;
  const bool use_kernel = n.kernel && !(n.formula && (create_graph || formula_only || forward));
  if (forward && !n.formula)
    throw GraphError(std::string("forward AD: '") + n.op + "' (" + recorded_str(n) + ") has a "
                     "kernel but no formula in ops, so forward mode cannot go through its backward");
  if (create_graph && !n.formula)
    throw GraphError("backward: " + op_at(n) + " is not twice differentiable: it has a kernel "
                     "but no formula in ops, so create_graph cannot record its backward");
  const RecordingWithin within(n);
  // The output, attached to n again, so that a formula in Y stays differentiable.
  Tensor Y = n.saves_output ? node_output(n.shared_from_this(), n.output_storage) : Tensor();
  if (const Node::Extras* x = n.extras_if();
      Y.defined() && x && x->output_tangent && x->output_tangent_level == forward_level()) {
    Y.impl().tangent = x->output_tangent;
    Y.impl().tangent_level = x->output_tangent_level;
  }
  Grads grads = run_derivative(n, use_kernel ? n.kernel : n.formula, dY, Y);
  if (is_anomaly_enabled()) check_anomaly(n, grads);
  return grads;
}

}  // namespace detail

}  // namespace tg
