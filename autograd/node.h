#pragma once
// The tape. Each op that sees an input requiring grad (with grad mode on) records a Node on its
// output: the edges to its inputs and its derivative, in two forms (the derivative contract):
//
//   - the formula, written with tg ops: the single truth, and what create_graph records, so
//     every op is twice differentiable (like PyTorch's derivatives.yaml);
//   - a kernel, optional: a direct computation of the same gradients, for speed, used when no
//     graph is being built. The op-case registry test checks that both agree.
//
// Ops record right under their forward, micrograd style:
//
//   Tensor Y = ...forward...;
//   return record("softmax", Y, {X}, where).formula([](const Tensor& dY, const Tensor& Y) {
//     return Grads{mul(Y, sub(dY, sum(mul(dY, Y), -1, true)))};  // dX
//   });
//
// A derivative that takes (dY, Y) gets the op's output back, attached to this node, so a formula
// in Y stays differentiable; one that takes only (dY) does not keep the output alive.
// `.saves(A, B)` names the tensors the derivative reads besides the output: if any of them (or a
// saved output) is written in place before the backward runs, the backward throws GraphError
// naming the op instead of computing with the new values.
//
// `.jvp(...)` is the third part, forward mode's tangent rule (autograd/forward_ad.h): from the
// inputs' tangents, (t) -> Tensor or (t, Y) -> Tensor, the output's tangent J t, in tg ops:
//
//   .jvp([](const Tangents& t, const Tensor& Y) { return mul(Y, sub(t[0], sum(mul(t[0], Y), -1, true))); })
//
// t[i] is input i's tangent, undefined where it has none (a zero tangent); the rule runs only
// when some input has one, inside a DualLevel, whatever grad mode is. It returns a tensor of the
// output's shape and dtype, or an undefined one for a zero tangent. The rule runs inside
// `.jvp(...)` and is not kept, so it may capture by reference (a vector of options, say). Like a
// kernel beside a formula, a rule may compute the same tangent directly (a tangent kernel) when
// nothing will differentiate it: grad mode off, or no input and no tangent requires grad
// (`detail::tangent_records` in ops/tangent.h). gelu, layer_norm and the fused attention go one
// step further: they compute the tangent together with their output, in the same pass (gelu and
// layer_norm through `detail::fused_tangent`), and their rule hands it back.
//
// What a derivative may do: compute gradients from dY, the saved tensors and the output, with
// tg ops (formula) or directly (kernel), and throw tg errors. What it may not do: run a backward
// or tg::grad (the engine is not re-entrant: GraphError), write into dY, a saved tensor or the
// output, or keep state between calls (a retained graph may run it again).

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <type_traits>
#include <vector>

#include <tapegrad/autograd/backward_fn.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {

// The input's shape and dtype, to check what backward returns, are its node's output_shape and
// output_dtype, or the leaf's own: an edge does not keep a copy.
/// An edge to an op's input: the input's own node (a non-leaf input), or the input itself (a
/// requires_grad leaf), or nothing (an input that needs no gradient). One owning pointer, which
/// of the two it is in its lowest bit (both are aligned): an edge is 16 bytes.
class Edge {
 public:
  Edge() = default;
  explicit Edge(std::shared_ptr<Node> node) : p_(std::move(node)) {}
  explicit Edge(std::shared_ptr<TensorImpl> leaf) {
    void* tagged = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(leaf.get()) | 1);
    p_ = std::shared_ptr<void>(std::move(leaf), tagged);
  }
  bool active() const { return p_ != nullptr; }
  /// The input's node, or null (a leaf, or no edge).
  Node* node() const { return is_leaf() ? nullptr : static_cast<Node*>(p_.get()); }
  /// The leaf, or null (a node, or no edge).
  TensorImpl* leaf() const {
    return is_leaf() ? reinterpret_cast<TensorImpl*>(bits() & ~std::uintptr_t{1}) : nullptr;
  }
  /// The leaf, shared (an edge to a leaf only).
  std::shared_ptr<TensorImpl> leaf_ptr() const { return {p_, leaf()}; }
  /// Moves the node's reference out (null for a leaf or no edge; a leaf's edge is kept).
  std::shared_ptr<Node> take_node() {
    if (!p_ || is_leaf()) return nullptr;
    Node* n = static_cast<Node*>(p_.get());
    return {std::move(p_), n};
  }
  friend bool operator==(const Edge& a, const Edge& b) { return a.p_.get() == b.p_.get(); }

 private:
  std::uintptr_t bits() const { return reinterpret_cast<std::uintptr_t>(p_.get()); }
  bool is_leaf() const { return bits() & 1; }
  std::shared_ptr<void> p_;  // a Node, or a TensorImpl's address + 1
};

/// A tensor a derivative reads, with the version its buffer had when the op recorded it. (Its
/// shape, for the error message, is found then among the node's inputs and output: a node keeps
/// no copy.)
struct SavedVersion {
  const Storage* storage;
  uint64_t version;
};

/// What a checkpointed region's node holds instead of a derivative (ops/checkpoint.h): its edges,
/// to every tensor the region's graph reached outside itself (the inputs and the parameters fn
/// read, any number of them), and `run`, which records the region again from the inputs it kept
/// and returns its output on that new graph. The backward pass splices the new graph in the
/// node's place (backward_pass.cpp).
struct Recompute {
  std::vector<Edge> edges;
  std::function<Tensor()> run;  // null once the node is released
};

inline constexpr int kMaxSaved = kMaxInputs + 1;
// Most ops read at most 4 inputs and save at most 3 tensors: a node keeps those in itself, and
// one that has more (a fused attention, an LSTM cell) gets one small array more, so that every
// node is not sized for them.
inline constexpr int kInlineInputs = 4;
inline constexpr int kInlineSaved = 3;

class Node : public std::enable_shared_from_this<Node> {
 public:
  const char* op = "";
  // (The small members sit in pairs, so that the node carries little padding: a node is made
  // per op call.)
  int num_inputs = 0;
  int num_saved = 0;
  BackwardFn formula;  // in tg ops: what create_graph records
  BackwardFn kernel;   // optional: direct, used when no graph is being built
  /// The i-th tensor the derivative reads (i < num_saved).
  const SavedVersion& saved(int i) const {
    return i < kInlineSaved ? inline_saved_[i] : more_saved_[i - kInlineSaved];
  }
  bool saves_output = false;
  bool released = false;  // backward ran without retain_graph: the closures are gone
  Dtype output_dtype = Dtype::f64;
  std::shared_ptr<Storage> output_storage;  // only when saves_output
  uint64_t output_version = 0;
  Shape output_shape;
  std::source_location where;  // the user's call that recorded this node
  const char* within = nullptr;  // the user's op whose backward (create_graph) recorded this one
  /// What few nodes carry, apart (one pointer in every node): hooks on the output's gradient
  /// (Tensor::register_hook), a checkpointed region, and forward mode's output tangent and its
  /// level, so that a formula reading the output (dY, Y) sees it as the output's other handles
  /// do (forward over reverse).
  struct Extras {
    std::shared_ptr<detail::HookList> hooks;
    std::unique_ptr<Recompute> recompute;
    std::shared_ptr<TensorImpl> output_tangent;
    uint64_t output_tangent_level = 0;
  };
  /// The extras, made on first use, from the pool (throws MemoryError). (Registering a hook
  /// while another thread runs a backward through the same graph is not supported.)
  Extras& extras() {
    if (!extras_) extras_.reset(::new (detail::pool_allocate(sizeof(Extras))) Extras());
    return *extras_;
  }
  /// The extras, or null when none were made.
  const Extras* extras_if() const { return extras_.get(); }
  detail::HookList* hooks() const { return extras_ ? extras_->hooks.get() : nullptr; }
  /// A checkpointed region's, else null.
  Recompute* recompute() const { return extras_ ? extras_->recompute.get() : nullptr; }
  // Engine-private: this node's state in the backward pass now running, and which pass owns it
  // (a second thread's backward through the same graph is refused, not raced).
  int slot = -1;
  std::atomic<const void*> owner{nullptr};
  // Engine-private: while this node waits in its thread's queue to be freed, the node queued
  // before it (tape.cpp). The queue is a list through the nodes, so queueing needs no memory.
  std::shared_ptr<Node> release_next;

  Node() {}  // user-provided: make_shared does not zero the block before the initialisers
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Hands the nodes it held the last reference to to a per-thread queue drained in a loop, so
  /// freeing a chain of a million nodes never recurses a million deep, nor needs memory.
  ~Node();
  /// Drops what backward needed (closures, saved output).
  void release();
  /// The edges to the inputs, next(0 .. num_inputs - 1), or a checkpointed region's.
  std::span<const Edge> edges() const {
    if (Recompute* r = recompute()) return r->edges;
    return {next_, static_cast<std::size_t>(num_inputs)};
  }
  /// The edge to input i, i < num_inputs.
  const Edge& next(int i) const { return next_[i]; }
  Edge& next(int i) { return next_[i]; }
  /// Makes room for n edges (once, before any is set): in the node for up to kInlineInputs, else
  /// in one array. Throws MemoryError.
  void reserve_inputs(int n);
  /// Notes one more tensor the derivative reads. Throws GraphError past kMaxSaved, MemoryError.
  void add_saved(const SavedVersion& v);
  /// Empties what the op fills in after attach (the saved tensors, the kept output, the
  /// closures; hooks and an output tangent from an earlier call; `released`), for the op to fill
  /// in again: a replayed step (StaticStep) keeps the node and its edges, and takes the closures
  /// of this call's op, with what they captured this time.
  void clear_for_replay();

 private:
  struct ExtrasDeleter {
    void operator()(Extras* x) const noexcept {
      x->~Extras();
      detail::pool_deallocate(x, sizeof(Extras));
    }
  };
  std::unique_ptr<Extras, ExtrasDeleter> extras_;
  std::array<Edge, kInlineInputs> inline_next_{};
  std::unique_ptr<Edge[]> more_next_;
  Edge* next_ = inline_next_.data();  // inline_next_, or more_next_ for an op of many inputs
  std::array<SavedVersion, kInlineSaved> inline_saved_;
  std::unique_ptr<SavedVersion[]> more_saved_;  // saved tensors kInlineSaved and on, when used
};

/// Makes a node (one block, from the per-thread pool).
std::shared_ptr<Node> make_node();

/// The inputs an op records, by reference: `record("mul", Y, {A, B})` copies no handle until it
/// makes an edge (a copy of a handle is an atomic count in a program with threads). A parameter
/// type only: it refers to the braced list or the vector it was made from.
class InputRefs {
 public:
  // (GCC warns that keeping list.begin() does not extend the list's life: it need not, since the
  // braced list lives to the end of the call's full expression, and so does this parameter.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  InputRefs(std::initializer_list<std::reference_wrapper<const Tensor>> list)
      : listed_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  InputRefs(std::span<const Tensor> tensors) : tensors_(tensors.data()), size_(tensors.size()) {}
  InputRefs(const std::vector<Tensor>& tensors) : InputRefs(std::span<const Tensor>(tensors)) {}
  std::size_t size() const { return size_; }
  const Tensor& operator[](std::size_t i) const {
    return tensors_ ? tensors_[i] : listed_[i].get();
  }

 private:
  const std::reference_wrapper<const Tensor>* listed_ = nullptr;
  const Tensor* tensors_ = nullptr;
  std::size_t size_;
};

namespace detail {
/// While alive, every node this thread records is appended to `nodes` (the innermost collector
/// only): how checkpoint finds the graph its region recorded.
class NodeCollector {
 public:
  explicit NodeCollector(std::vector<Node*>& nodes);
  ~NodeCollector();
  NodeCollector(const NodeCollector&) = delete;
  NodeCollector& operator=(const NodeCollector&) = delete;
  /// Appends n to the innermost living collector, if any.
  static void note(Node* n);

 private:
  std::vector<Node*>* outer_;
};
/// While alive, every op this thread runs with grad mode off notes its inputs that require grad
/// in `edges` (once each; the innermost collector only): checkpoint's forward runs fn so, and
/// those are its region's edges (the inputs and parameters fn read).
class ReadCollector {
 public:
  explicit ReadCollector(std::vector<Edge>& edges);
  ~ReadCollector();
  ReadCollector(const ReadCollector&) = delete;
  ReadCollector& operator=(const ReadCollector&) = delete;
  /// Whether one is alive on this thread.
  static bool active();
  static void note(const InputRefs& inputs);

 private:
  std::vector<Edge>* outer_;
};
/// A tensor of `storage`'s values as the output of `node` (its shape and dtype).
Tensor node_output(std::shared_ptr<Node> node, std::shared_ptr<Storage> storage);
bool any_requires_grad(const InputRefs& inputs);
/// Makes the node of `out`, with edges to `inputs`, and returns `out` attached to it; `node` is
/// set to the node. Throws GraphError for more than kMaxInputs inputs.
Tensor attach(Tensor out, const char* op, const InputRefs& inputs,
              const std::source_location& where, Node*& node);
/// Notes that the node's derivative reads its output (kept, and its version checked).
void save_output(Node& node, const Tensor& out);
/// Notes that the node's derivative reads `t` (its version is checked before backward).
void save(Node& node, const Tensor& t);

/// The inputs' tangents at the open forward-AD level, or null when none has one.
std::unique_ptr<Tangents> gather_tangents(const InputRefs& inputs);
/// Makes t (checked against out's shape and dtype; undefined: none) out's tangent, and the
/// node's record of it. Throws GraphError naming op when t does not fit.
void set_output_tangent(Tensor& out, Node* node, const char* op, const Tensor& t,
                        const std::source_location& where);
/// The output as a rule (t, Y) reads it: its values and place on the tape in a handle of its own,
/// so that a tangent recorded from it (grad mode on) does not hold the handle that holds the
/// tangent (a cycle that would never be freed).
Tensor output_for_rule(const Tensor& out);
/// Rethrows the exception in flight, same type, naming op's tangent rule.
[[noreturn]] void rethrow_in_tangent_rule(const char* op);
/// Throws GraphError: op met a dual input and has no tangent rule.
[[noreturn]] void throw_no_tangent_rule(const char* op);

template <class F>
constexpr bool takes_output() {
  return std::is_invocable_v<F, const Tensor&, const Tensor&>;
}
/// Builds f, as a (dY, Y) closure, in fn's place (not in a BackwardFn of its own, moved in).
template <class F>
void set_backward(BackwardFn& fn, F&& f) {
  if constexpr (takes_output<F>())
    fn.emplace(std::forward<F>(f));
  else
    fn.emplace([g = std::forward<F>(f)](const Tensor& dY, const Tensor&) -> Grads { return g(dY); });
}
}  // namespace detail

/// An op's output on its way onto the tape: `record(...)` makes the node (when grad mode is on
/// and an input requires grad; else nothing is recorded and the calls below do nothing), then
/// `.saves(...)`, `.formula(...)` and `.kernel(...)` fill it in. It converts to the output.
class Recording {
 public:
  Recording(Tensor out, Node* node, const char* op = "", std::unique_ptr<Tangents> tangents = nullptr,
            const std::source_location& where = std::source_location::current())
      : out_(std::move(out)), node_(node), op_(op), tangents_(std::move(tangents)), where_(where) {}
  // A copy (a lambda returning `record(...).formula(...)` returns one) carries the pending
  // tangents too.
  Recording(const Recording& o)
      : out_(o.out_), node_(o.node_), op_(o.op_),
        tangents_(o.tangents_ ? std::make_unique<Tangents>(*o.tangents_) : nullptr), where_(o.where_) {}
  Recording& operator=(const Recording& o) {
    if (this != &o) *this = Recording(o);
    return *this;
  }
  Recording(Recording&&) noexcept = default;
  Recording& operator=(Recording&&) noexcept = default;

  /// The tensors the derivative reads besides the output: their versions are checked.
  template <class... Ts>
  Recording& saves(const Ts&... ts) {
    if (node_) (detail::save(*node_, ts), ...);
    return *this;
  }
  /// The derivative in tg ops, (dY) -> Grads or (dY, Y) -> Grads: what create_graph records.
  template <class F>
  Recording& formula(F&& f) {
    if (node_) {
      if constexpr (detail::takes_output<F>()) detail::save_output(*node_, out_);
      detail::set_backward(node_->formula, std::forward<F>(f));
    }
    return *this;
  }
  /// The same derivative computed directly, used when no graph is being built. An op with a
  /// kernel and no formula is not twice differentiable: create_graph through it throws.
  template <class K>
  Recording& kernel(K&& k) {
    if (node_) {
      if constexpr (detail::takes_output<K>()) detail::save_output(*node_, out_);
      detail::set_backward(node_->kernel, std::forward<K>(k));
    }
    return *this;
  }
  /// The tangent rule, (t) -> Tensor or (t, Y) -> Tensor, in tg ops (see the top): run now when
  /// an input carries a tangent, and the output gets its result. Forward mode through an op
  /// recorded without one throws GraphError naming it.
  template <class R>
  Recording& jvp(R&& rule) {
    if (!tangents_) return *this;
    Tensor t;
    try {
      const detail::NoForwardGuard inside_the_rule;
      if constexpr (std::is_invocable_v<R, const Tangents&, const Tensor&>)
        t = rule(*tangents_, detail::output_for_rule(out_));
      else
        t = rule(*tangents_);
    } catch (...) {
      detail::rethrow_in_tangent_rule(op_);
    }
    tangents_.reset();
    detail::set_output_tangent(out_, node_, op_, t, where_);
    return *this;
  }
  operator Tensor() const { return output(); }
  const Tensor& output() const {
    if (tangents_) detail::throw_no_tangent_rule(op_);
    return out_;
  }

 private:
  Tensor out_;
  Node* node_;
  const char* op_;
  std::unique_ptr<Tangents> tangents_;  // forward mode: the inputs' tangents, until .jvp runs
  std::source_location where_;          // the user's call, for anomaly mode's message
};

/// Starts recording `out` as made by `op` from `inputs` (see Recording). Throws GraphError for
/// more than kMaxInputs inputs.
inline Recording record(const char* op, Tensor out, const InputRefs& inputs,
                        const std::source_location& where = std::source_location::current()) {
  std::unique_ptr<Tangents> tangents;
  if (detail::forward_level() != 0) [[unlikely]]
    tangents = detail::gather_tangents(inputs);
  if (!is_grad_enabled()) {
    if (detail::ReadCollector::active()) detail::ReadCollector::note(inputs);
    return Recording(std::move(out), nullptr, op, std::move(tangents), where);
  }
  if (!detail::any_requires_grad(inputs))
    return Recording(std::move(out), nullptr, op, std::move(tangents), where);
  Node* node;
  Tensor y = detail::attach(std::move(out), op, inputs, where, node);
  return Recording(std::move(y), node, op, std::move(tangents), where);
}

/// Gradients of `outputs` (weighted by `grad_outputs`) with respect to `inputs`, returned rather
/// than accumulated into .grad(), like torch.autograd.grad. An input the outputs do not depend on
/// gets zeros. retain_graph unset (PyTorch's None) means the same as create_graph. Throws
/// GraphError (an input that requires no grad, a freed graph) as backward() does.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool create_graph = false,
                         std::optional<bool> retain_graph = std::nullopt,
                         const std::source_location& where = std::source_location::current());

}  // namespace tg
