#pragma once
// .npy files (numpy's own format): format versions 1.0 to 3.0, little-endian float32 ('<f4') or
// float64 ('<f8'), C order, rank 0 to 6; and, for token data (data/), where the caller asks for
// them, little-endian int64 ('<i8') and int32 ('<i4', widened to int64). Anything else is
// rejected with a tg::IoError whose one-line message names the file and the problem, e.g.
//   X.npy: data has 96 bytes, shape (8, 4) float64 needs 256

#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg {

// Integers are opt-in: an input that must be float (the attention tool's) keeps numpy's
// default int64 arrays out with a clear error instead of silently converting them.
enum class NpyAccept { floats, floats_and_ints };

/// Reads a .npy file into a new leaf tensor; throws IoError (unreadable or malformed file, or a
/// dtype `accept` leaves out).
Tensor read_npy(const std::string& path, NpyAccept accept = NpyAccept::floats);

/// Parses the bytes of a .npy file; `name` labels error messages; throws IoError when malformed.
Tensor read_npy_bytes(const std::string& bytes, const std::string& name,
                      NpyAccept accept = NpyAccept::floats);

/// Writes `t` ('<f4', '<f8', '<i8' for int64, '|b1' for bool) as a version 1.0 .npy file via a temporary file
/// and a rename, so a failure never leaves a partial file; throws IoError naming `path`
/// (ValueError for an undefined tensor).
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tg
