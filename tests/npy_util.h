#pragma once
// .npy bytes built by hand, for the npy suites: a preamble of any version, a well-formed file
// around a header dict, and the data of a few known arrays.

#include <cstdint>
#include <string>
#include <vector>

namespace tg::test {

// Magic, version and a little-endian header length of `length_bytes` bytes.
inline std::string preamble(int major, int minor, uint64_t header_len, int length_bytes) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  return out;
}

// A well-formed file around `dict`: padded with spaces and a '\n' to a 64-byte data offset.
inline std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + length_bytes;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return preamble(major, 0, header.size(), length_bytes) + header + data;
}

inline std::string dict(const std::string& descr, const std::string& shape,
                        const std::string& fortran = "False") {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

inline std::vector<double> iota(int64_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) * scale;
  return v;
}

inline std::string f64_bytes(int64_t n) { return raw_bytes(iota(n, 0.5)); }

}  // namespace tg::test
