// libFuzzer target for the IDX image reader: any byte string (raw or gzip-compressed) either
// parses into an array whose dims account for every value, or throws tg::IoError with a
// one-line, printable message that starts with the file name. Any other exception, a crash, a
// leak or a sanitizer report is a bug.

#include <cstddef>
#include <cstdint>
#include <string>

#include <tapegrad/data/idx.h>
#include "fuzz/fuzz_util.h"

const char tg::fuzz::kTarget[] = "idx_fuzz";

namespace {

using tg::fuzz::bug;

constexpr const char* kName = "fuzz-images-idx3-ubyte.gz";

void check_array(const tg::data::IdxArray& a) {
  if (a.dims.empty() || a.dims.size() > 4) bug("an array of " + std::to_string(a.dims.size()) + " dims");
  uint64_t count = 1;
  for (int64_t d : a.dims) {
    if (d < 1) bug("a dim below 1");
    count *= static_cast<uint64_t>(d);
  }
  if (count != a.values.size()) bug("the dims do not account for the values");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tg::fuzz::run_reader([&] { check_array(tg::data::read_idx_bytes(bytes, kName)); }, kName);
  return 0;
}
