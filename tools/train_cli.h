#pragma once
// The CLI11 flags of `tapegrad train` and `tapegrad sample`, kept beside their commands so that
// main.cpp only adds the subcommands and dispatches.

#include <CLI/CLI.hpp>

#include "tools/inspect_cmd.h"
#include "tools/sample_cmd.h"
#include "tools/train_cmd.h"

namespace tg {

/// Adds `train` to app, its flags parsed into args (defaults: nanoGPT's CPU recipe for
/// shakespeare_char).
CLI::App* add_train_command(CLI::App& app, TrainArgs& args);
/// After parsing: records which flags were given and the command line (without --resume) for
/// the hint printed after Ctrl-C. Never throws.
void finish_train_args(const CLI::App& train, TrainArgs& args, int argc, char** argv);

/// Adds `sample` to app, its flags parsed into args.
CLI::App* add_sample_command(CLI::App& app, SampleArgs& args);

/// Adds `inspect` to app, its flags parsed into args.
CLI::App* add_inspect_command(CLI::App& app, InspectArgs& args);

}  // namespace tg
