#pragma once
// Data-parallel training, as torch's DistributedDataParallel does it by hand: every rank holds a
// full replica of the model, runs forward and backward on its own slice of the global batch,
// then
//   average_gradients(model, comm);     // every grad = mean over ranks of the ranks' grads
//   optimizer.step();                   // the same update on every rank
// With a loss that is a mean over rows and equal slices, the mean of the ranks' gradients is the
// gradient of the whole batch, so N ranks follow the one-process run (to rounding). At the start,
// broadcast_parameters(model, comm) makes every replica equal to rank 0's.
//
//   auto comm = tg::dist::make_communicator(&argc, &argv);
//   tg::dist::broadcast_parameters(model, *comm);
//   for (step ...) {
//     model.zero_grad();
//     loss_of(model, my_slice).backward();
//     tg::dist::average_gradients(model, *comm);
//     opt.step();
//   }

#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/dist/communicator.h>
#include <tapegrad/nn/module.h>

namespace tg::dist {

/// Elements per allreduce: gradients are packed into buckets of this many elements per dtype
/// (8 MiB of float64), so the staging memory stays small for any model.
inline constexpr int64_t kBucketElements = int64_t{1} << 20;

/// Collective: every parameter's gradient becomes the mean over ranks of the ranks' gradients
/// (sum, then divided by size()). A rank without a gradient for a parameter contributes zeros,
/// so every rank makes the same calls; a parameter without a gradient on every rank keeps none
/// (the optimizer skips it, as in one process). Writes go in place into a gradient buffer only
/// this parameter sees (its version moves on); a gradient the caller also holds, or a recorded
/// one (create_graph), is replaced through set_grad and keeps its values, as backward does.
/// Every rank must pass the same parameter list (names, shapes, dtypes, order). Throws
/// ValueError for an undefined or int64 parameter or a gradient of another dtype or shape.
void average_gradients(const std::vector<Tensor>& params, Communicator& comm);
/// average_gradients(module.parameters(), comm).
void average_gradients(nn::Module& module, Communicator& comm);

/// Collective: every parameter takes root's values (in place; versions move on). First checks
/// that every rank holds the same layout as root (count, shapes, dtypes): when one does not,
/// every rank throws RankError naming the first mismatch on the lowest such rank. Throws
/// ValueError for a bad root or an undefined parameter (on the rank that has it: call with the
/// same, defined parameters everywhere).
void broadcast_parameters(const std::vector<Tensor>& params, Communicator& comm, int root = 0);
/// broadcast_parameters(module.parameters(), comm, root).
void broadcast_parameters(nn::Module& module, Communicator& comm, int root = 0);

}  // namespace tg::dist
