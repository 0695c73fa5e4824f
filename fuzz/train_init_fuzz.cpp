// libFuzzer target for `tapegrad train --init FILE`, run in-process through tg::run_train: the
// fuzzer's bytes are the --init file of a one-update run of a tiny model (1 layer, 1 head,
// n_embd 4, block 4) on a fixed text whose vocabulary is "abc" (so the tensors are small:
// transformer.wte.weight (3, 4), transformer.wpe.weight (4, 4), ... ; see
// fuzz/make_train_init_corpus.py, which writes the seed corpus).
// The contract checked (bad input: one clear line, no partial output): run_train either throws a
// tg::Error whose message is one printable line and leaves no --out folder behind, or returns 0
// with the four files written. Anything else (another exception type, a crash, a sanitizer report)
// aborts.

#include <cstdint>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <tapegrad/autograd/error.h>
#include "fuzz/fuzz_util.h"
#include "tools/train_cmd.h"

const char tg::fuzz::kTarget[] = "train_init_fuzz";

namespace fs = std::filesystem;
using tg::fuzz::bug;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "abcabcbca";  // 180 characters of "abc"
  tg::fuzz::write_file(tg::fuzz::scratch_root() / "text.txt", text);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const fs::path& root = tg::fuzz::scratch_root();
  const fs::path init = root / "init.safetensors", out = root / "out";
  std::error_code ec;
  fs::remove_all(out, ec);
  tg::fuzz::write_file(init, std::string_view(reinterpret_cast<const char*>(data), size));

  tg::TrainArgs args;
  args.text = (root / "text.txt").string();
  args.out = out.string();
  args.init = init.string();
  args.layers = 1;
  args.heads = 1;
  args.embd = 4;
  args.block = 4;
  args.batch = 2;
  args.steps = 1;
  args.warmup = 0;
  args.eval_every = 1;
  args.eval_batches = 1;
  args.threads = 1;
  args.handle_sigint = false;
  std::ostringstream progress;
  try {
    if (tg::run_train(args, progress) != 0) bug("run_train returned non-zero without a throw");
  } catch (const tg::Error& e) {
    const std::string msg = e.what();
    if (!tg::fuzz::one_printable_line(msg)) bug("error message is not one printable line: " + msg);
    if (fs::exists(out, ec)) bug("an error left " + out.string() + " behind: " + msg);
    return 0;
  } catch (const std::exception& e) {
    bug(std::string("not a tg::Error: ") + e.what());
  }
  for (const char* f : {"model.safetensors", "train_state.safetensors", "metrics.csv", "loss.svg"})
    if (!fs::is_regular_file(out / f, ec)) bug(std::string("success without ") + f);
  return 0;
}
