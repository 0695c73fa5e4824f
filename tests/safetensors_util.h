#pragma once
// What the safetensors suites share: a file built by hand around a header, metadata with JSON
// escapes in it, and the check that a list of tensors came back bit for bit.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include <tapegrad/autograd/tensor.h>
#include "test_util.h"

namespace tg::test {

using Metadata = std::map<std::string, std::string>;

inline std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// A file around `header` as given (no padding: the reader needs none).
inline std::string st_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

// The same names in the same order; each a leaf without requires_grad, equal bit for bit.
inline void expect_same(const NamedTensors& expected, const NamedTensors& got) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].first);
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_TRUE(same_bytes(got[i].second, expected[i].second))
        << expected[i].second.shape().str() << " " << dtype_name(expected[i].second.dtype())
        << " vs " << got[i].second.shape().str() << " " << dtype_name(got[i].second.dtype());
    EXPECT_TRUE(got[i].second.is_leaf());
    EXPECT_FALSE(got[i].second.requires_grad());
  }
}

inline const Metadata kMetadata = {
    {"tapegrad.config", R"({"n_layer": 2, "n_head": 4, "gelu": "tanh"})"},
    {"tapegrad.vocab", "\n !'abc\\\"\xc3\xa9"},
    {"empty", ""},
};

}  // namespace tg::test
