#pragma once
// .safetensors files (Hugging Face's checkpoint format): an 8-byte
// little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
//    "__metadata__": {"key": "string value", ...}}
// padded with spaces, then the tensors' bytes, C order, little-endian. F32, F64, I64 and BOOL
// (bytes 0 and 1) only, rank 0 to 6. The reader is strict: anything the format does not allow (a truncated file,
// offsets that overlap, leave gaps or run past the data, a shape that disagrees with its offsets,
// malformed JSON, ...) is a tg::IoError whose one-line message names the file and the problem:
//   model.safetensors: tensor 'wte' has shape (65, 128) F32 (33280 bytes) but data_offsets [0, 100]

#include <map>
#include <string>
#include <string_view>

#include <tapegrad/autograd/tensor.h>

namespace tg {

struct SafeTensors {
  NamedTensors tensors;  // in the order of their data offsets
  std::map<std::string, std::string> metadata;
};

/// Reads a .safetensors file into new leaf tensors; throws IoError (unreadable or malformed).
SafeTensors read_safetensors(const std::string& path);

/// Parses the bytes of a .safetensors file; `name` labels error messages; throws IoError when
/// malformed.
SafeTensors parse_safetensors(std::string_view bytes, const std::string& name);

/// The bytes of a .safetensors file holding `tensors` in the given order; throws ValueError (an
/// undefined tensor, an empty, duplicate or "__metadata__" name, text that is not UTF-8), naming
/// `name`.
std::string serialize_safetensors(const NamedTensors& tensors,
                                  const std::map<std::string, std::string>& metadata = {},
                                  const std::string& name = "safetensors");

/// Writes a .safetensors file via a temporary file and a rename, so a failure leaves `path` as it
/// was; throws ValueError (as serialize_safetensors) before touching the disk, IoError naming
/// `path` when the write fails.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tg
