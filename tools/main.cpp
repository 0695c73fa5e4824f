// The `tapegrad` command-line program: demo, attention, check, train, sample, inspect.
// Exit status: 0 success, 1 a failed check or a bad input file, 2 bad command-line usage.
// Under mpirun (`mpirun -np N tapegrad train ...`) every rank runs this; rank 0 alone prints.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include <tapegrad/autograd/error.h>
#include <tapegrad/dist/communicator.h>
#include "tools/commands.h"
#include "tools/demo.h"
#include "tools/train_cli.h"

namespace {

// The one line of an error on several ranks: rank 0 speaks for all; "rank R: " tells where the
// failure came from when it was not rank 0 itself.
int report(const tg::dist::RankError& e) {
  std::cerr << "tapegrad: " << (e.rank() == 0 ? e.message() : std::string(e.what()))
            << (e.status() == 2 ? " (see tapegrad --help)" : "") << "\n";
  return e.status();
}

}  // namespace

int main(int argc, char** argv) {
  // MPI's communicator under mpirun, else one process (MPI is then never initialised).
  std::unique_ptr<tg::dist::Communicator> comm;
  try {
    comm = tg::dist::make_communicator(&argc, &argv);
  } catch (const tg::Error& e) {
    std::cerr << "tapegrad: " << e.what() << "\n";
    return 1;
  }
  // Every rank parses the same command line and meets the same usage errors: one rank prints.
  std::ostream quiet(nullptr);
  std::ostream& err = comm->rank() == 0 ? std::cerr : quiet;

  CLI::App app{"tapegrad: reverse-mode autodiff on Eigen, with causal self-attention checked "
               "against finite differences"};
  app.require_subcommand(0, 1);
  app.add_subcommand("demo", "Walk through the self-attention lesson on its own example");
  tg::AttentionArgs attention_args;
  tg::add_attention_command(app, attention_args);
  app.add_subcommand("check", "gradcheck and gradgradcheck of every op and model");

  tg::TrainArgs train_args;
  CLI::App* train = tg::add_train_command(app, train_args);
  tg::SampleArgs sample_args;
  tg::add_sample_command(app, sample_args);
  tg::InspectArgs inspect_args;
  tg::add_inspect_command(app, inspect_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return comm->rank() == 0 ? app.exit(e) : 0;  // --help
    err << "tapegrad: " << e.what() << " (see tapegrad --help)\n";
    return 2;
  }

  if (app.get_subcommands().empty()) {
    err << "tapegrad: a subcommand is required: demo, attention, check, train, sample or "
           "inspect "
           "(see tapegrad --help)\n";
    return 2;
  }
  if (comm->size() > 1 && !app.got_subcommand("train")) {
    err << "tapegrad: only train runs on several ranks; start "
        << app.get_subcommands().front()->get_name() << " without mpirun\n";
    return 2;
  }
  try {
    if (app.got_subcommand("demo")) return tg::run_demo(std::cout);
    if (app.got_subcommand("check")) return tg::run_check(std::cout);
    if (app.got_subcommand("train")) {
      tg::finish_train_args(*train, train_args, argc, argv);
      return tg::run_train(train_args, std::cerr, *comm);
    }
    if (app.got_subcommand("sample")) {
      tg::run_sample(sample_args, std::cout);
      return 0;
    }
    if (app.got_subcommand("inspect")) return tg::run_inspect(inspect_args, std::cout);
    tg::run_attention(attention_args);
    return 0;
  } catch (const tg::dist::RankError& e) {  // agreed by every rank
    return comm->rank() == 0 ? report(e) : e.status();
  } catch (const tg::UsageError& e) {  // flags that do not fit together
    err << "tapegrad: " << e.what() << " (see tapegrad --help)\n";
    return 2;
  } catch (const tg::Error& e) {  // with several ranks: thrown alike on every rank
    err << "tapegrad: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "tapegrad: internal error: " << e.what() << "\n";
    return 1;
  }
}
