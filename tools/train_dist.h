#pragma once
// The data-parallel parts of `tapegrad train`: which rows of
// each global batch a rank trains on and how its loss is weighted so that the averaged gradients
// are the whole batch's, files that rank 0 reads for everyone, and errors that every rank agrees
// on. With one rank every function here is the identity or a plain call.

#include <cstdint>
#include <exception>
#include <string>

#include <tapegrad/data/batch.h>
#include <tapegrad/dist/communicator.h>
#include "tools/arch.h"
#include "tools/train_cmd.h"

namespace tg {

/// Throws UsageError unless the global batch of `B` rows splits into `ranks` equal slices.
void check_batch_splits(int64_t B, int ranks);

/// This rank's part of the global batch's loss L (the mean of cross_entropy over the batch's
/// counted labels, those that are not -1).
struct SliceLoss {
  Tensor backprop;  // what this rank backpropagates; undefined when its slice counts no target
  double share = 0;  // its share of L: the shares of all ranks sum to L
};

/// Rows [rank b, (rank + 1) b) of `batch` (b = B / ranks) through the model. Backpropagating
/// `backprop` on every rank, then average_gradients, gives the gradient of L itself, for slices
/// with any number of ignored labels. Throws as Model::forward and Model::loss.
SliceLoss slice_loss(const Model& model, const data::Batch& batch, int rank, int ranks);

/// How many ranks of the job run on this machine, as the MPI launcher says (Open MPI's
/// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS); 1 when it does not. Never throws.
int ranks_on_this_machine();

/// Collective: root's bytes of `text` reach every rank (its length first). Throws ValueError
/// only for a bad root.
void broadcast_string(dist::Communicator& comm, std::string& text, int root = 0);

/// The seed of the dropout masks of `rank` at update `step` when there are several ranks: each
/// rank needs masks of its own, and a seed computed from the step (not a stream carried along)
/// keeps the saved state the same for any number of ranks. Never throws.
uint64_t rank_dropout_seed(uint64_t seed, int64_t step, int rank);

/// Runs `step()`. With several ranks every rank then agrees on the outcome: all return, or all
/// throw the same dist::RankError (the lowest failing rank's message, status 2 for a UsageError,
/// else 1). With one rank the exception passes through unchanged.
template <class F>
void agreed(dist::Communicator& comm, F&& step) {
  if (comm.size() == 1) {
    step();
    return;
  }
  std::exception_ptr error;
  int status = 1;
  try {
    step();
  } catch (const UsageError&) {
    error = std::current_exception();
    status = 2;
  } catch (...) {
    error = std::current_exception();
  }
  dist::agree_on_failure(comm, error, status);
}

}  // namespace tg
