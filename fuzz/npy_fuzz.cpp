// libFuzzer target for the .npy reader: any byte string either parses into a tensor that agrees
// with its own header, or throws tg::IoError with a one-line, printable message that starts with
// the file name. Any other exception, a crash, a leak or a sanitizer report is a bug.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "autograd/storage.h"
#include "io/npy.h"

namespace {

constexpr const char* kName = "fuzz.npy";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "npy_fuzz: BUG: %s\n", what.c_str());
  std::abort();
}

// The contract of every tg::IoError from the reader (DESIGN.md: "one clear line").
void check_message(std::string_view m) {
  const std::string prefix = std::string(kName) + ": ";
  if (!m.starts_with(prefix)) bug("IoError message does not start with the file name: " + std::string(m));
  if (m.size() == prefix.size()) bug("IoError message has nothing after the file name");
  for (const char ch : m) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e)
      bug("IoError message holds a raw control or non-ASCII byte 0x" + std::to_string(c) +
          " (must be one printable line): " + std::string(m));
  }
}

// A tensor that came back must be consistent with the bytes it came from.
void check_tensor(const tg::Tensor& t, std::size_t input_size) {
  if (!t.defined()) bug("read_npy_bytes returned an undefined tensor");
  if (t.rank() < 0 || t.rank() > tg::kMaxRank) bug("rank out of range");
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * tg::dtype_size(t.dtype());
  if (bytes > input_size) bug("tensor holds more data than the file: " + t.shape().str());
  if (t.requires_grad() || !t.is_leaf()) bug("read_npy_bytes must return a plain leaf");
  // Touch every element (ASan checks the buffer is as large as the shape says).
  volatile double sink = 0;
  for (const double v : t.to_vector()) sink = sink + (v == v ? 0.0 : 1.0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const tg::Tensor t = tg::read_npy_bytes(bytes, kName);
    check_tensor(t, size);
  } catch (const tg::IoError& e) {
    check_message(e.what());
  } catch (const std::exception& e) {
    bug(std::string("unexpected exception (not tg::IoError): ") + e.what());
  } catch (...) {
    bug("unexpected non-std exception");
  }
  tg::empty_cache();  // every buffer back to malloc, so ASan sees each free
  return 0;
}
