#pragma once
// What the engine's files share; internal, not installed. tape.cpp: a node's life (recorded, its
// derivative run, freed); backward_pass.cpp: the pass; leaf_grads.cpp: summing gradients and
// committing .grad(). Beside them: grad_ready.cpp (the callbacks the pass tells), hooks.cpp, and
// anomaly mode's check in grad_mode.cpp.

#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include <tapegrad/autograd/grad_ready.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/static_step.h>

namespace tg::detail {

/// Empties v, and gives its memory back when a huge graph made it huge (else it is kept, so the
/// next use of v allocates nothing).
template <class V>
void clear_keeping_small(V& v) {
  v.clear();
  if (v.capacity() > 4096) V().swap(v);
}

/// Names n for messages: "'softmax' (recorded at model.cpp:12)", or for a node a backward
/// recorded, "'mul' (recorded within the backward of 'softmax' at model.cpp:12)".
std::string op_at(const Node& n);

/// While alive, the nodes this thread records (a formula's ops under create_graph, the sums of
/// gradients) are named as recorded within `op`'s backward at the user's line `where`, not at
/// the library's line that made them: an error in a later backward points at the user's code.
class RecordingWithin {
 public:
  RecordingWithin(const char* op, const std::source_location& where);
  explicit RecordingWithin(const Node& n) : RecordingWithin(n.within ? n.within : n.op, n.where) {}
  ~RecordingWithin();
  RecordingWithin(const RecordingWithin&) = delete;
  RecordingWithin& operator=(const RecordingWithin&) = delete;
  const char* op;
  std::source_location where;

 private:
  const RecordingWithin* outer_;
};
/// Runs n's derivative on dY. Throws GraphError (a tensor it saved was changed in place since,
/// or create_graph through a kernel alone) or what the derivative threw, naming the op.
Grads call_backward(Node& n, const Tensor& dY, bool create_graph);

/// The flat index of t's first NaN or infinity (and its value), or -1 (grad_mode.cpp).
int64_t first_non_finite(const Tensor& t, double& value);
/// "NaN", "inf" or "-inf".
const char* non_finite_name(double value);
/// Anomaly mode's check of what n's derivative returned: throws ValueError naming the op, its
/// line and the first NaN or infinity. Defined beside AnomalyGuard (grad_mode.cpp).
void check_anomaly(const Node& n, const Grads& grads);

/// The callback of this thread's newest living GradReadyScope, or null (grad_ready.cpp).
const GradReadyFn* grad_ready_callback();

/// While alive, this thread's backward passes run each node's formula even where it has a kernel,
/// so that gradcheck can check both derivative forms.
class FormulasOnly {
 public:
  FormulasOnly();
  ~FormulasOnly();
  FormulasOnly(const FormulasOnly&) = delete;
  FormulasOnly& operator=(const FormulasOnly&) = delete;

 private:
  bool outer_;
};

/// What a pass is asked: without inputs, gradients into every leaf's .grad() (Tensor::backward);
/// with inputs, their gradients returned and no .grad() touched (tg::grad).
struct BackwardCall {
  std::span<const Tensor> outputs;
  std::span<const Tensor> grad_outputs;  // none, or one per output (undefined: ones, for a scalar)
  const std::vector<Tensor>* inputs = nullptr;
  bool retain_graph = false;
  bool create_graph = false;
  std::source_location where;  // the user's backward() or grad() call
  bool zeros_for_unused = true;  // else an input no gradient reaches gets an undefined tensor
  const char* who() const { return inputs ? "grad" : "backward"; }  // for messages
};
/// Inside a StaticStep (static_step.cpp): whether it is replaying; the node recorded, noted; a
/// replay's op attached to its recorded node (checked to be the same op on the same places; a
/// GraphError names what differs), emptied for the op to fill in again (raw).
bool step_replaying(const StepTrace& step);
void step_note_node(StepTrace& step, const Tensor& y);
Tensor step_replay_attach(StepTrace& step, Tensor out, const char* op, const InputRefs& inputs,
                          Node*& raw);

/// Makes this thread's pass state (see make_node). Never throws but for a MemoryError.
void touch_pass_state();

/// Runs one pass. Throws GraphError, ShapeError or ValueError (see Tensor::backward), or what a
/// derivative threw, naming its op; every .grad() is as it was then.
std::vector<Tensor> run_backward(const BackwardCall& call);

/// A leaf a pass feeds (or that is an output).
struct LeafState {
  TensorImpl* leaf;
  std::shared_ptr<TensorImpl> grad;  // staged: committed to .grad() when the pass succeeds
  int input = -1;     // index among tg::grad's inputs, or -1
  int uses = 0;       // with a GradReadyScope: edges into this leaf whose node has not run yet
  bool told = false;  // the GradReadyScope's callback ran for this leaf
  bool hooked = false;  // its hooks ran on grad
};

/// Adds g into a slot that holds a gradient already, recorded under create_graph. Throws
/// MemoryError.
void add_into(std::shared_ptr<TensorImpl>& slot, const Tensor& g, bool create_graph);
/// Adds g into slot (null: zero so far). Throws MemoryError.
inline void accumulate_grad(std::shared_ptr<TensorImpl>& slot, const Tensor& g, bool create_graph) {
  if (slot)
    add_into(slot, g, create_graph);
  else
    slot = g.impl_ptr();
}
/// Adds each leaf's staged gradient into its .grad(). Throws MemoryError.
void commit_leaf_grads(std::span<const LeafState> leaves, bool create_graph);

}  // namespace tg::detail
