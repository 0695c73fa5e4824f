// libFuzzer target for `tapegrad train --init FILE`, run in-process through tg::run_train: the
// fuzzer's bytes are the --init file of a one-update run of a tiny model (1 layer, 1 head,
// n_embd 4, block 4) on a fixed text whose vocabulary is "abc" (so the tensors are small:
// transformer.wte.weight (3, 4), transformer.wpe.weight (4, 4), ... ; see
// fuzz/make_train_init_corpus.py, which writes the seed corpus).
// The contract checked (DESIGN.md): run_train either throws a tg::Error whose message is one
// printable line and leaves no --out folder behind, or returns 0 with the four files written.
// Anything else (another exception type, a crash, a sanitizer report) aborts.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "autograd/error.h"
#include "tools/train_cmd.h"

namespace {

namespace fs = std::filesystem;

fs::path g_root;  // this process's scratch folder

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "train_init_fuzz: BUG: %s\n", what.c_str());
  std::abort();
}

void remove_root() {
  std::error_code ec;
  if (!g_root.empty()) fs::remove_all(g_root, ec);
}

// $TG_FUZZ_TMPDIR, else /dev/shm (the checkpoint writes fsync: free on tmpfs), else /tmp.
fs::path scratch_base() {
  if (const char* env = std::getenv("TG_FUZZ_TMPDIR"); env && *env) return env;
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path();
}

void write_file(const fs::path& path, const char* data, std::size_t size) {
  std::ofstream f(path, std::ios::binary);
  f.write(data, static_cast<std::streamsize>(size));
  if (!f) bug("cannot write the scratch file " + path.string());
}

bool one_printable_line(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string tmpl = (scratch_base() / "train_init_fuzz.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) bug("cannot create a scratch folder");
  g_root = tmpl;
  std::atexit(remove_root);
  std::string text;
  for (int i = 0; i < 20; ++i) text += "abcabcbca";  // 180 characters of "abc"
  write_file(g_root / "text.txt", text.data(), text.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const fs::path init = g_root / "init.safetensors", out = g_root / "out";
  std::error_code ec;
  fs::remove_all(out, ec);
  write_file(init, reinterpret_cast<const char*>(data), size);

  tg::TrainArgs args;
  args.text = (g_root / "text.txt").string();
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
    if (!one_printable_line(msg)) bug("error message is not one printable line: " + msg);
    if (fs::exists(out, ec)) bug("an error left " + out.string() + " behind: " + msg);
    return 0;
  } catch (const std::exception& e) {
    bug(std::string("not a tg::Error: ") + e.what());
  }
  for (const char* f : {"model.safetensors", "train_state.safetensors", "metrics.csv", "loss.svg"})
    if (!fs::is_regular_file(out / f, ec)) bug(std::string("success without ") + f);
  return 0;
}
