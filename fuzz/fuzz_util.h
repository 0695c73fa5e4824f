#pragma once
// What the libFuzzer targets share: the BUG report that aborts (libFuzzer then keeps the input),
// the two contracts of an error message, the run of one input through a reader, and the scratch
// folder of the targets that run a command on files.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/storage.h>

namespace tg::fuzz {

namespace fs = std::filesystem;

/// The target's name, for its BUG lines; each target defines it:
/// `const char tg::fuzz::kTarget[] = "npy_fuzz";`.
extern const char kTarget[];

/// Prints "<target>: BUG: what" and aborts.
[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "%s: BUG: %s\n", kTarget, what.c_str());
  std::abort();
}

/// The contract of every tg::IoError from a reader given `file_name` (bad input is one clear line
/// naming the file): "file_name: " and then something, printable ASCII only. Calls bug() otherwise.
inline void check_reader_message(std::string_view m, const std::string& file_name) {
  const std::string prefix = file_name + ": ";
  if (!m.starts_with(prefix))
    bug("IoError message does not start with the file name: " + std::string(m));
  if (m.size() == prefix.size()) bug("IoError message has nothing after the file name");
  for (const char ch : m) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e)
      bug("IoError message holds a raw control or non-ASCII byte 0x" + std::to_string(c) +
          " (must be one printable line): " + std::string(m));
  }
}

/// One input through a reader: read_and_check() either returns (the reader accepted the bytes and
/// the target checked what came back) or throws a tg::IoError that check_reader_message accepts;
/// any other exception is a bug. Then every cached buffer goes back to malloc, so ASan sees each
/// free.
template <class F>
void run_reader(F&& read_and_check, const std::string& file_name) {
  try {
    read_and_check();
  } catch (const IoError& e) {
    check_reader_message(e.what(), file_name);
  } catch (const std::exception& e) {
    bug(std::string("unexpected exception (not tg::IoError): ") + e.what());
  } catch (...) {
    bug("unexpected non-std exception");
  }
  empty_cache();
}

/// Not empty, and no control character (a command's message may quote UTF-8 from a file).
inline bool one_printable_line(std::string_view s) {
  if (s.empty()) return false;
  for (const unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

/// This process's scratch folder, made on the first call and removed at exit: under
/// $TG_FUZZ_TMPDIR, else /dev/shm (the commands fsync every file they write: free on tmpfs),
/// else the system temp folder.
inline const fs::path& scratch_root() {
  static fs::path root;
  if (!root.empty()) return root;
  fs::path base;
  std::error_code ec;
  if (const char* env = std::getenv("TG_FUZZ_TMPDIR"); env && *env)
    base = env;
  else if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
    base = "/dev/shm";
  else
    base = fs::temp_directory_path();
  std::string tmpl = (base / (std::string(kTarget) + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) bug("cannot create a scratch folder " + tmpl);
  root = tmpl;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  });
  return root;
}

/// Writes `bytes` as the whole file; a scratch file that cannot be written is a bug of the setup.
inline void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) bug("cannot write the scratch file " + path.string());
}

}  // namespace tg::fuzz
