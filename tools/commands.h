#pragma once
// The subcommands of the `tapegrad` program; main.cpp adds their flags (CLI11) and calls these.

#include <ostream>
#include <string>

#include <tapegrad/nn/attention.h>

namespace CLI {
class App;
}

namespace tg {

struct AttentionArgs {
  std::string in_dir;
  std::string out_dir;
  // heads, window, scale, rope, rope_base; need_weights as the command's default: A.npy written
  AttentionOptions options{.need_weights = true};
  Dtype dtype = Dtype::f64;
};

/// Adds `attention` to app, its flags parsed into args (tools/attention_cli.cpp).
CLI::App* add_attention_command(CLI::App& app, AttentionArgs& args);

/// `tapegrad attention`: reads X, W_Q, W_K, W_V (and W_O when present) from in_dir, writes Y, A
/// (unless options.need_weights is false), loss and the gradient of every input to out_dir, all
/// or nothing. Throws tg::Error (IoError for files, ShapeError / ValueError for inputs that do
/// not fit), out_dir then as it was.
void run_attention(const AttentionArgs& args);

/// `tapegrad check`: gradcheck and gradgradcheck of every registered op and both models, as a
/// table on `out`. Returns the exit status: 0 when all pass, 1 otherwise.
int run_check(std::ostream& out);

}  // namespace tg
