#pragma once
// A run of `tapegrad train` as it stands between updates: what it holds, how it is set up from
// the flags (and from the checkpoint with --resume), and how it is saved into --out. The loop
// itself is tools/train_cmd.cpp's.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/static_step.h>
#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/reducer.h>
#include <tapegrad/optim/optim.h>
#include "tools/arch.h"
#include "tools/metrics.h"
#include "tools/train_cmd.h"
#include "tools/train_data.h"

namespace tg {

// Everything a run holds between updates.
struct Run {
  TrainArgs args;  // after the checkpoint's flags were applied
  std::unique_ptr<TrainData> data;
  std::unique_ptr<Model> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<dist::GradientReducer> reducer;  // averages the gradients over the ranks
  /// One process's forward and backward on full batches: the first run as usual, the second
  /// recorded, the later ones replayed (null with several ranks, --checkpoint-blocks or
  /// --no-replay).
  std::unique_ptr<StaticStep> step;
  int64_t start = 0;                // updates done before this invocation
  std::vector<MetricsRow> rows;     // one per update done
  double elapsed_before = 0;        // seconds spent by earlier invocations
};

/// The files of --resume and --init. Rank 0 alone reads them and sends the bytes to the others:
/// rank 0 wrote the checkpoint, so on machines without a shared filesystem only it has one.
struct RootFiles {
  std::string state, init;
  std::string model, metrics;  // only beside a train state of an older tapegrad (no weights in it)
};

/// Checks the flags (every rank) and reads the files (rank 0); collective. Throws as
/// check_train_flags, IoError for a file that cannot be read (as one dist::RankError on every
/// rank when there are several).
RootFiles read_root_files(const TrainArgs& flags, dist::Communicator& comm);

/// Builds the run from the flags (and the checkpoint with --resume), all checks included: the
/// data, the model (--arch's, or the checkpoint's), --init's weights, the optimizer, and with
/// --resume the state to continue from. Throws UsageError, IoError, ValueError, ShapeError.
Run prepare(const TrainArgs& flags, const RootFiles& files, int ranks);

/// The run's state after `done` updates, `elapsed` seconds in all, into --out: the checkpoint
/// (train_state.safetensors, the whole state, weights and metrics rows included) first, then
/// model.safetensors, metrics.csv and loss.svg from the same state, each through a temporary
/// name (tools/checkpoint.h), after removing the temporary files a killed save left. A failure
/// or a kill at any point leaves a checkpoint that resumes: the previous one or this one.
/// Throws IoError / ValueError.
void save(Run& run, int64_t done, double elapsed);

}  // namespace tg
