#pragma once
// The flags of `tapegrad train` beyond what CLI11 checks one by one: which go together, their
// ranges, and how --resume fills in the flags the user did not repeat from the checkpoint.

#include <map>
#include <string>

#include "tools/arch.h"
#include "tools/train_cmd.h"

namespace tg {

/// The defaults of image data (--images) for the flags not given, in place of nanoGPT's:
/// --arch cnn, --batch 64, --epochs 1, AdamW as torch.optim.AdamW's defaults (--beta2 0.999,
/// --weight-decay 0.01), --warmup 0 and --lr-min = --lr (a constant rate), --grad-clip 0 and
/// --eval-every 0 (an evaluation of the test set after every epoch instead). Never throws.
void apply_data_defaults(TrainArgs& args);

/// Checks the flags as given: one data source, --vocab where needed, known names (--arch among
/// them), ranges, flags of the other optimizer. Throws UsageError; IoError when --out is an
/// existing file.
void check_train_flags(const TrainArgs& args);

/// --resume: --arch and the model flags become the checkpoint's model's (an explicitly given one
/// that differs is a UsageError naming both), and the run flags not given (lr, steps, seed, ...)
/// the checkpoint's `tapegrad.args`. Throws UsageError (a given flag that contradicts the
/// checkpoint, another data source than the run's), IoError naming `file` (malformed metadata).
void apply_checkpoint_flags(TrainArgs& args, const Model& model,
                            const std::map<std::string, std::string>& metadata,
                            const std::string& file);

/// The run flags (not the model's, not the data source) as JSON, for the train state.
std::string run_args_json(const TrainArgs& args);

}  // namespace tg
