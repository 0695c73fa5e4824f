// StaticStep (autograd/static_step.h). Recording: fn runs on the tape as usual while the trace
// notes, in order, every node recorded; the backward keeps the graph. Replaying: fn runs again,
// and each op that would record a node gets the recorded one instead (attach, tape.cpp), after a
// check that it is the same op on the same places, emptied for the op to fill in again: what its
// closures capture (the tensors they read, cross_entropy's targets, ...) is this call's. So the
// graph the backward runs over is the one an eager call would have recorded. The buffers come
// from the cache as eagerly. (The recorded step's buffers are not written again in place: a
// tensor fn's caller kept from an earlier call would change under it. Nor are the sizes of the
// tensors fn makes checked: a kernel's scratch follows the threads free at the time.)

#include <tapegrad/autograd/static_step.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>

namespace tg {

namespace detail {

struct StepTrace {
  bool replaying = false;
  std::vector<std::shared_ptr<Node>> nodes;  // every node the recorded step made, in order
  std::size_t next_node = 0;                 // a replay's place among them
};

namespace {

thread_local StepTrace* active = nullptr;

// While alive, `step` is this thread's current step.
class StepScope {
 public:
  explicit StepScope(StepTrace& step) : outer_(std::exchange(active, &step)) {}
  ~StepScope() { active = outer_; }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  StepTrace* outer_;
};

std::string shape_str(const Tensor& t) {
  return t.shape().str() + " " + dtype_name(t.dtype());
}

}  // namespace

StepTrace* current_step() { return active; }

bool step_replaying(const StepTrace& s) { return s.replaying; }

void step_note_node(StepTrace& s, const Tensor& y) { s.nodes.push_back(y.impl().grad_fn); }

Tensor step_replay_attach(StepTrace& s, Tensor out, const char* op, const InputRefs& inputs,
                          Node*& raw) {
  const std::size_t k = s.next_node;
  auto differs = [&](const std::string& what) -> GraphError {
    return GraphError("StaticStep: the replay's op #" + std::to_string(k + 1) + ", '" + op +
                      "', " + what + ": fn does not run the same ops on every call (a branch "
                      "on the data, or on state outside fn); the next call records again");
  };
  if (k >= s.nodes.size())
    throw differs("is one more than the recorded step's " + std::to_string(s.nodes.size()));
  const std::shared_ptr<Node>& node = s.nodes[k];
  Node& n = *node;
  if (n.op != op && std::strcmp(n.op, op) != 0)
    throw differs("is " + op_at(n) + " in the recorded step");
  if (static_cast<int>(inputs.size()) != n.num_inputs)
    throw differs("takes " + std::to_string(inputs.size()) + " inputs, the recorded one " +
                  std::to_string(n.num_inputs));
  for (int i = 0; i < n.num_inputs; ++i) {
    const Tensor& t = inputs[i];
    const Edge& e = n.next(i);
    const bool same = t.defined() && t.requires_grad()
                          ? (t.is_leaf() ? e.leaf() == t.impl_ptr().get()
                                         : e.node() == t.impl().grad_fn.get())
                          : !e.active();
    if (!same)
      throw differs("reads as its input " + std::to_string(i) + " another tensor on the tape "
                    "than the recorded step's (or one whose requires_grad differs)");
  }
  if (out.shape() != n.output_shape || out.dtype() != n.output_dtype)
    throw differs("made " + shape_str(out) + " where the recorded one made " +
                  n.output_shape.str() + " " + dtype_name(n.output_dtype));
  n.clear_for_replay();
  raw = &n;
  s.next_node = k + 1;
  if (out.impl_ptr().use_count() == 1 && out.is_leaf() && !out.requires_grad()) {
    out.impl().requires_grad = true;
    out.impl().grad_fn = node;
    return out;
  }
  return node_output(node, out.impl().storage);
}

void throw_in_static_step(const char* what) {
  throw GraphError(std::string(what) + " inside a StaticStep's fn: the step records its tape "
                   "once and replays it, which that would break (autograd/static_step.h)");
}

}  // namespace detail

struct StaticStep::Plan {
  detail::StepTrace trace;
  std::vector<Tensor> inputs;  // the recorded step's: each call's values are copied in
  std::size_t root = 0;        // the loss's node, in trace.nodes
};

StaticStep::StaticStep(Fn fn) : fn_(std::move(fn)) {
  if (!fn_) throw ValueError("StaticStep: fn is empty");
}
StaticStep::~StaticStep() = default;
StaticStep::StaticStep(StaticStep&&) noexcept = default;
StaticStep& StaticStep::operator=(StaticStep&&) noexcept = default;

void StaticStep::reset() { plan_.reset(); }

bool StaticStep::fits(const std::vector<Tensor>& inputs) const {
  if (!plan_) return true;
  if (inputs.size() != plan_->inputs.size()) return false;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined() || inputs[i].shape() != plan_->inputs[i].shape() ||
        inputs[i].dtype() != plan_->inputs[i].dtype())
      return false;
  return true;
}

Tensor StaticStep::operator()(const std::vector<Tensor>& inputs,
                              const std::source_location& where) {
  if (detail::current_step())
    throw GraphError("StaticStep: called inside another StaticStep's fn");
  if (!is_grad_enabled())
    throw GraphError("StaticStep: called with grad mode off (NoGradGuard); the step records a "
                     "backward");
  if (detail::forward_level() != 0)
    throw GraphError("StaticStep: called inside a forward-mode DualLevel; the step is reverse "
                     "mode's");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw ValueError("StaticStep: input " + std::to_string(i) + " is an undefined tensor");
    if (inputs[i].requires_grad())
      throw ValueError("StaticStep: input " + std::to_string(i) + " (" +
                       inputs[i].shape().str() + ") requires grad; the inputs are data, copied "
                       "into the step's own: read tensors that need gradients (the parameters) "
                       "in fn");
  }
  if (!warm_) {
    // The first call runs as usual, so that what fn makes once and keeps (a table a module
    // builds on its first forward) is not part of the recording.
    Tensor loss = fn_(inputs);
    if (!loss.defined()) throw ValueError("StaticStep: fn returned an undefined tensor");
    loss.backward(Tensor(), false, false, where);
    warm_ = true;
    return loss.detach().clone();
  }
  if (!plan_) return record(inputs, where);
  if (inputs.size() != plan_->inputs.size())
    throw ShapeError("StaticStep: " + std::to_string(inputs.size()) + " inputs where the "
                     "recorded step took " + std::to_string(plan_->inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& a = inputs[i];
    const Tensor& b = plan_->inputs[i];
    if (a.shape() != b.shape() || a.dtype() != b.dtype())
      throw ShapeError("StaticStep: input " + std::to_string(i) + " is " + detail::shape_str(a) +
                       " where the recorded step's was " + detail::shape_str(b) +
                       "; a step replays one set of shapes (reset() to record another)");
  }
  return replay(inputs, where);
}

Tensor StaticStep::record(const std::vector<Tensor>& inputs, const std::source_location& where) {
  auto plan = std::make_unique<Plan>();
  for (const Tensor& x : inputs) plan->inputs.push_back(x.detach().clone());
  Tensor loss;
  {
    const detail::StepScope scope(plan->trace);
    loss = fn_(plan->inputs);
  }
  if (!loss.defined()) throw ValueError("StaticStep: fn returned an undefined tensor");
  std::vector<std::shared_ptr<Node>>& nodes = plan->trace.nodes;
  const auto root = std::find(nodes.begin(), nodes.end(), loss.impl().grad_fn);
  if (root == nodes.end())
    throw GraphError("StaticStep: fn returned a tensor of shape " + loss.shape().str() +
                     " that it did not make on the tape (a leaf, or made outside fn)");
  plan->root = static_cast<std::size_t>(root - nodes.begin());
  loss.backward(Tensor(), /*retain_graph=*/true, /*create_graph=*/false, where);
  Tensor value = loss.detach().clone();
  plan->trace.replaying = true;
  plan_ = std::move(plan);
  return value;
}

Tensor StaticStep::replay(const std::vector<Tensor>& inputs, const std::source_location& where) {
  Plan& p = *plan_;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor& to = p.inputs[i];
    to.impl().storage->bump_version();
    std::memcpy(to.impl().storage->data(), inputs[i].impl().storage->data(),
                static_cast<std::size_t>(to.numel()) * dtype_size(to.dtype()));
  }
  detail::StepTrace& t = p.trace;
  t.next_node = 0;
  Tensor loss;
  try {
    {
      const detail::StepScope scope(t);
      loss = fn_(p.inputs);
    }
    if (t.next_node != t.nodes.size())
      throw GraphError("StaticStep: the replay recorded " + std::to_string(t.next_node) +
                       " ops where the recorded step had " + std::to_string(t.nodes.size()) +
                       ": fn does not run the same ops on every call");
    if (!loss.defined() || loss.impl().grad_fn != t.nodes[p.root])
      throw GraphError("StaticStep: fn returned another tensor than the recorded step's loss");
  } catch (...) {
    plan_.reset();  // some nodes are filled in by this call, the rest by the last: record again
    throw;
  }
  loss.backward(Tensor(), /*retain_graph=*/true, /*create_graph=*/false, where);
  ++replays_;
  return loss.detach().clone();
}

}  // namespace tg
