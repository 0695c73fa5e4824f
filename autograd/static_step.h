#pragma once
// StaticStep: a training step's forward and backward, recorded once and replayed. For a step that
// runs the same ops on the same shapes every time (training, as a rule), the first call runs it
// as usual, the second keeps its tape, and each later call runs the forward again with that tape,
// not a new one, and the backward over it:
//
//   tg::StaticStep step([&](const std::vector<tg::Tensor>& in) {
//     return cross_entropy(model.forward(in[0]), in[1]);
//   });
//   for (...) {
//     double loss = step({x, y}).item();  // the loss; the gradients are in the parameters' .grad()
//     opt.step();
//     opt.zero_grad();
//   }
//
// Each call is `loss = fn(inputs); loss.backward();` with the same numbers bit for bit: the
// ops run as they do on the tape, but make no node and no edge: each takes its recorded node and
// fills in its closures again, with what they capture this time. What the replay checks, and
// names in a GraphError when it differs: the ops recorded, in order, each with its inputs'
// places on the tape and its output's shape and dtype, and the loss. So the backward runs over
// the graph an eager call would have recorded. (torch.cuda.graphs and tinygrad's TinyJit replay
// kernels into fixed buffers; this replays the tape, and its buffers come from the cache as
// eagerly, so a tensor fn made in an earlier call keeps its values. The inputs fn is given are
// the step's own, written each call.) Between calls the kept tape holds one call's saved tensors
// (an eager step frees them after its backward); a hook put on one of fn's tensors after its
// call does not carry over to the next.
//
// What fn may do: read the inputs it is given and tensors made outside it (the parameters,
// updated in place between calls), draw random numbers (dropout draws new masks, as eagerly),
// and return a scalar loss. What it may not: take inputs that require grad, run a backward,
// register hooks on its tensors, or use tg::checkpoint (GraphError); nor may the step be called
// inside a forward-mode DualLevel. The loss returned is a copy, off the tape.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

class StaticStep {
 public:
  using Fn = std::function<Tensor(const std::vector<Tensor>& inputs)>;
  explicit StaticStep(Fn fn);
  ~StaticStep();
  StaticStep(StaticStep&&) noexcept;
  StaticStep& operator=(StaticStep&&) noexcept;

  /// loss = fn(inputs), then loss.backward() into the parameters' .grad() (summed, as backward
  /// does); returns the loss, a copy off the tape. The first call runs as usual (what fn makes
  /// once and keeps, a module's table built on its first forward, is made then); the second (or
  /// the first after reset()) records the step; the later ones replay it on the new inputs'
  /// values. Throws ShapeError
  /// when an input's shape or dtype is not the recorded step's (fits() tells beforehand),
  /// ValueError for an input that requires grad, GraphError when fn did not run the recorded
  /// ops (the step is then dropped: the next call records again), or what fn or the backward
  /// threw.
  Tensor operator()(const std::vector<Tensor>& inputs,
                    const std::source_location& where = std::source_location::current());
  /// Whether a call with these inputs replays the recorded step (or records one: true before
  /// the first call).
  bool fits(const std::vector<Tensor>& inputs) const;
  /// Whether a step is recorded.
  bool recorded() const { return plan_ != nullptr; }
  /// How many calls replayed the recorded step.
  int64_t replays() const { return replays_; }
  /// Drops the recorded step, its tape and the buffers it saved: the next call records again.
  void reset();

 private:
  struct Plan;
  Tensor record(const std::vector<Tensor>& inputs, const std::source_location& where);
  Tensor replay(const std::vector<Tensor>& inputs, const std::source_location& where);
  Fn fn_;
  std::unique_ptr<Plan> plan_;
  int64_t replays_ = 0;
  bool warm_ = false;  // the first call ran
};

namespace detail {
struct StepTrace;
/// The step this thread is recording or replaying now (inside a StaticStep's fn), or null.
StepTrace* current_step();
/// Throws GraphError: `what` is not allowed inside a StaticStep's fn.
[[noreturn]] void throw_in_static_step(const char* what);
}  // namespace detail

}  // namespace tg
