// libFuzzer target for the .safetensors reader: any byte string either parses into tensors that
// account for every data byte and survive a write and a second read unchanged, or throws
// tg::IoError with a one-line, printable message that starts with the file name. Any other
// exception, a crash, a leak or a sanitizer report is a bug.

#include <cstdint>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <string_view>

#include <tapegrad/autograd/storage.h>
#include "fuzz/fuzz_util.h"
#include <tapegrad/io/safetensors.h>

const char tg::fuzz::kTarget[] = "safetensors_fuzz";

namespace {

using tg::fuzz::bug;

constexpr const char* kName = "fuzz.safetensors";

std::size_t bytes_of(const tg::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * tg::dtype_size(t.dtype());
}

bool same(const tg::SafeTensors& a, const tg::SafeTensors& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name_a, ta] = a.tensors[i];
    const auto& [name_b, tb] = b.tensors[i];
    if (name_a != name_b || ta.shape() != tb.shape() || ta.dtype() != tb.dtype() ||
        std::memcmp(ta.impl().storage->data(), tb.impl().storage->data(), bytes_of(ta)) != 0)
      return false;
  }
  return true;
}

// What came back must be consistent with the bytes it came from, and writable as it is.
void check_result(const tg::SafeTensors& st, std::size_t input_size) {
  std::set<std::string> names;
  std::size_t total = 0;
  for (const auto& [name, t] : st.tensors) {
    if (name.empty() || name == "__metadata__") bug("a tensor came back named '" + name + "'");
    if (!names.insert(name).second) bug("two tensors came back named '" + name + "'");
    if (!t.defined() || t.rank() > tg::kMaxRank) bug("tensor '" + name + "' is malformed");
    if (t.requires_grad() || !t.is_leaf()) bug("parse_safetensors must return plain leaves");
    total += bytes_of(t);
  }
  if (total + 8 > input_size) bug("the tensors hold more data than the file");

  std::string written;
  try {
    written = tg::serialize_safetensors(st.tensors, st.metadata, kName);
  } catch (const std::exception& e) {
    bug(std::string("what the reader accepted, the writer refused: ") + e.what());
  }
  tg::SafeTensors again;
  try {
    again = tg::parse_safetensors(written, kName);
  } catch (const tg::IoError& e) {
    bug(std::string("the reader refused what the writer wrote: ") + e.what());
  }
  if (!same(st, again)) bug("a write and a second read changed the tensors or the metadata");
  if (tg::serialize_safetensors(again.tensors, again.metadata, kName) != written)
    bug("writing is not deterministic");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tg::fuzz::run_reader([&] { check_result(tg::parse_safetensors(bytes, kName), size); }, kName);
  return 0;
}
