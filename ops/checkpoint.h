#pragma once
// Activation checkpointing, as torch.utils.checkpoint (non-reentrant): checkpoint(fn, inputs)
// returns fn(inputs) but keeps only the inputs for the backward, not the intermediates fn makes;
// the backward records fn again from them (its forward twice in all) and differentiates that.
// Gradients are those of the plain fn(inputs), bit for bit: the backward runs the recorded-again
// graph in the order the plain one would have run. (Several outputs are packed into one tensor
// and split again, two more nodes: a derivative of a derivative through them, create_graph, may
// then sum a gradient of three or more parts in another order, equal to rounding.)
//
//   x = checkpoint([&](const std::vector<Tensor>& in) { return block(in[0]); }, {x},
//                  {.rngs = {&dropout_rng}});
//
// fn may read tensors other than `inputs` (a module's parameters): they get their gradients as in
// the plain run, and must not change before the backward. Random numbers: every Rng fn draws
// from (dropout's) goes in `rngs`; its state is kept at the forward and put back for the
// recomputation (then restored), so the masks are the same. A recomputation that gives other
// values than the forward (an Rng not listed, a parameter or mode changed since) throws
// GraphError rather than computing wrong gradients. With grad mode off, inside a forward-AD
// level (fwad::DualLevel: tangents go through fn's own ops, on the tape), or when fn reads nothing
// that requires grad, checkpoint is fn itself. Nested checkpoints work.
//
// Unlike PyTorch's first run, the forward runs fn with grad mode off (so that it keeps nothing):
// a tensor fn lets out other than through its outputs (a capture, a forward hook) does not
// require grad, and a loss built from it adds no gradient. fn, what it refers to and the Rngs
// must outlive the backward. Layers with state run twice, as in PyTorch (BatchNorm's running
// statistics move twice per step in training mode).
//
// How the backward runs the recomputation without a backward inside a backward: see the top of
// autograd/backward_pass.cpp.

#include <functional>
#include <source_location>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

struct CheckpointOptions {
  std::vector<Rng*> rngs;  // every Rng fn draws from; restored for the recomputation
};

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// fn(inputs), checkpointed. Throws ValueError (an empty fn, an undefined input, fn returning no
/// tensor or an undefined one, several outputs of different dtypes) and GraphError (fn writes
/// into an input in place); the backward throws GraphError when an input or a tensor fn read was
/// changed in place since, or the recomputation gives other values.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {},
                               const std::source_location& where = std::source_location::current());
/// The same, for an fn of one output.
Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>& inputs)>& fn,
                  const std::vector<Tensor>& inputs, const CheckpointOptions& options = {},
                  const std::source_location& where = std::source_location::current());

}  // namespace tg
