#include <CLI/CLI.hpp>

#include <string>

#include <tapegrad/nn/config_json.h>
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tg {

CLI::App* add_attention_command(CLI::App& app, AttentionArgs& a) {
  auto* att = app.add_subcommand(
      "attention", "Causal self-attention on .npy inputs: writes Y, A, loss and the gradients");
  att->add_option("--in", a.in_dir, "Folder with X.npy, W_Q.npy, W_K.npy, W_V.npy [W_O.npy]")
      ->required()
      ->check(CLI::ExistingDirectory);
  att->add_option("--out", a.out_dir, "Folder to write Y.npy, A.npy, loss.npy, dX.npy, ...")
      ->required();
  att->add_option("--heads", a.options.heads, "Number of heads H (divides d_k and d_v)")
      ->check(int_at_least(1));
  att->add_option("--window", a.options.window, "Sliding window of w positions (w >= 1)")
      ->check(int_at_least(1));
  att->add_flag_callback("--no-scale", [&a] { a.options.scale = false; },
                         "Drop the 1/sqrt(d) scale of the scores");
  att->add_flag("--rope", a.options.rope, "Rotary position embedding on Q and K");
  att->add_option("--rope-base", a.options.rope_base, "RoPE base (default 10000)")
      ->check(positive_real());
  att->add_flag_callback("--no-weights", [&a] { a.options.need_weights = false; },
                         "Fused attention: O(T d) memory for long sequences, writes no A.npy");
  att->add_option_function<std::string>(
         "--dtype",
         [&a](const std::string& name) {
           const auto k = nn::find_name(nn::kDtypeNames, name);  // checked below, never empty
           if (k) a.dtype = static_cast<Dtype>(*k);
         },
         "Compute in f64 (default) or f32")
      ->check(member_of(nn::kDtypeNames));
  return att;
}

}  // namespace tg
