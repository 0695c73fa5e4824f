// libFuzzer target for the .npy reader: any byte string either parses into a tensor that agrees
// with its own header, or throws tg::IoError with a one-line, printable message that starts with
// the file name. Any other exception, a crash, a leak or a sanitizer report is a bug.

#include <cstddef>
#include <cstdint>
#include <string>

#include <tapegrad/autograd/storage.h>
#include "fuzz/fuzz_util.h"
#include <tapegrad/io/npy.h>

const char tg::fuzz::kTarget[] = "npy_fuzz";

namespace {

using tg::fuzz::bug;

constexpr const char* kName = "fuzz.npy";

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
  tg::fuzz::run_reader([&] { check_tensor(tg::read_npy_bytes(bytes, kName), size); }, kName);
  return 0;
}
