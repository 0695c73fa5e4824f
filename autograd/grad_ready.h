#pragma once
// Gradient-ready callbacks: how a caller learns, during a backward pass, that a leaf's gradient
// for this pass is complete, while the pass goes on with the rest of the graph. This is what
// overlapping work with backward needs (dist::GradientReducer starts a bucket's allreduce as soon
// as its parameters are ready, as torch's DistributedDataParallel does with its autograd hooks).
//
//   tg::GradReadyScope scope([&](const tg::Tensor& leaf, const tg::Tensor& grad) { ... });
//   loss.backward();  // the callback runs once per leaf, in the order the leaves complete
//
// The callback runs on the thread running backward, inside the pass, once per requires_grad leaf
// that gets a gradient from the pass, at the moment every use of the leaf below the outputs has
// sent its part: for a leaf used once that is when its consumer's backward ran; for a tied weight
// (used twice) after the second use. `grad` is this pass's gradient alone: the pass commits it
// into leaf.grad() (adding to what .grad() held) only after the whole graph ran, so that an error
// anywhere leaves every .grad() as it was; the callback sees .grad() as it was before the pass.
// A leaf to which the pass sends no gradient gets no call. tg::grad (which writes no .grad())
// makes no calls.
//
// What a callback may do: read `grad` and `leaf` (not modify them: the pass still owns `grad`),
// copy values, start communication. It may not run a backward (the engine refuses with
// GraphError). An exception from it ends the pass and reaches the caller of backward; no .grad()
// is changed then.

#include <functional>

#include <tapegrad/autograd/tensor.h>

namespace tg {

using GradReadyFn = std::function<void(const Tensor& leaf, const Tensor& grad)>;

/// Installs `on_ready` for the backward passes this thread runs while the scope lives (other
/// threads are not affected). Scopes nest: the newest living one is called. They may end in any
/// order (a scope held by an object that outlives a later one): an ending scope leaves the
/// newest of those still alive in charge. End a scope on the thread that made it. Throws nothing.
class GradReadyScope {
 public:
  explicit GradReadyScope(GradReadyFn on_ready);
  ~GradReadyScope();
  GradReadyScope(const GradReadyScope&) = delete;
  GradReadyScope& operator=(const GradReadyScope&) = delete;

 private:
  GradReadyFn fn_;
  GradReadyScope* older_;  // this thread's living scopes, a doubly linked list, newest last
  GradReadyScope* newer_ = nullptr;
};

}  // namespace tg
