// .safetensors files that must be rejected: a table of malformed files, each one line naming the
// file and the problem, and a header over the size limit.

#include <tapegrad/io/safetensors.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "safetensors_util.h"
#include "test_util.h"

namespace tg {
namespace {

using test::le64;
using test::st_file;

struct BadFile {
  const char* label;
  std::string bytes;
  const char* fragment;  // expected in the message
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + R"(":{"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" +
         offsets + "}";
}

std::vector<BadFile> bad_files() {
  const std::string a = entry("a", "\"F32\"", "[2]", "[0,8]");
  const std::string ok = st_file("{" + a + "}", std::string(8, '\x01'));
  const auto one = [](const std::string& dtype, const std::string& shape,
                      const std::string& offsets, std::size_t data_bytes = 8) {
    return st_file("{" + entry("a", dtype, shape, offsets) + "}", std::string(data_bytes, '\0'));
  };
  const auto with_a = [&](const std::string& rest, std::size_t data_bytes) {
    return st_file("{" + a + "," + rest + "}", std::string(data_bytes, '\0'));
  };
  return {
      // the length and the JSON
      {"empty file", "", "the file is empty"},
      {"five bytes", std::string("\x10\0\0\0\0", 5),
       "the file has 5 bytes, too few for the 8-byte header length"},
      {"header length past the end", le64(100) + "{}",
       "header length 100 goes past the end of the file (10 bytes)"},
      {"header length 2^63", le64(1ULL << 63) + ok.substr(8),
       "header length 9223372036854775808 goes past the end of the file"},
      {"cut inside the header", ok.substr(0, 20), "goes past the end of the file (20 bytes)"},
      {"malformed JSON", st_file(R"({"a":)"), "malformed JSON header: parse error"},
      {"text after the JSON", st_file("{} x"), "malformed JSON header"},
      {"single quotes", st_file("{'a': 1}"), "malformed JSON header"},
      {"not UTF-8", st_file("{\"\xff\":1}"), "malformed JSON header"},
      {"header an array", st_file("[]"), "the header is [], not a JSON object"},
      {"header a string", st_file("\"F32\""), "the header is \"F32\", not a JSON object"},
      {"deep nesting", st_file(R"({"a":{"shape":[[[[[1]]]]]}})"), "nested deeper than"},
      // the entries
      {"entry not an object", st_file(R"({"a":1})"), "tensor 'a' is 1, not an object"},
      {"empty name", st_file("{" + entry("", "\"F32\"", "[0]", "[0,0]") + "}"),
       "a tensor has an empty name"},
      {"duplicate name", with_a(a, 0), "duplicate tensor name 'a'"},
      {"duplicate key", st_file(R"({"a":{"dtype":"F32","dtype":"F32"}})"),
       "duplicate key 'dtype' in the header"},
      {"no dtype", st_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'a' has no 'dtype'"},
      {"no shape", st_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", std::string(8, 0)),
       "tensor 'a' has no 'shape'"},
      {"no data_offsets", st_file(R"({"a":{"dtype":"F32","shape":[2]}})", std::string(8, 0)),
       "tensor 'a' has no 'data_offsets'"},
      {"extra key",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":0}})",
               std::string(8, 0)),
       "tensor 'a' has an unexpected key 'x'"},
      // dtypes
      {"BF16", one("\"BF16\"", "[4]", "[0,8]"),
       "tensor 'a' has unsupported dtype \"BF16\" (only F32, F64, I64 and BOOL"},
      {"I32", one("\"I32\"", "[2]", "[0,8]"), "unsupported dtype \"I32\""},
      {"lower case", one("\"f32\"", "[2]", "[0,8]"), "unsupported dtype \"f32\""},
      {"dtype a number", one("4", "[2]", "[0,8]"), "unsupported dtype 4"},
      // shapes
      {"negative dim", one("\"F32\"", "[-2]", "[0,8]"), "shape [-2] with a negative dimension -2"},
      {"float dim", one("\"F32\"", "[2.0]", "[0,8]"), "with a non-integer dimension 2.0"},
      {"string dim", one("\"F32\"", "[\"2\"]", "[0,8]"), "with a non-integer dimension \"2\""},
      {"shape an int", one("\"F32\"", "2", "[0,8]"), "tensor 'a' has shape 2, not a list"},
      {"rank 7", one("\"F32\"", "[1,1,2,1,1,1,1]", "[0,8]"), "of rank 7; at most 6 is supported"},
      {"dim past int64", one("\"F32\"", "[9223372036854775808]", "[0,8]"),
       "a dimension beyond 64 bits"},
      {"count overflow", one("\"F32\"", "[4294967296,4294967296]", "[0,8]"),
       "element count overflows 64 bits"},
      {"bytes overflow", one("\"F64\"", "[4611686018427387904]", "[0,8]"),
       "size in bytes overflows 64 bits"},
      {"shape disagrees with offsets", one("\"F32\"", "[3]", "[0,8]"),
       "tensor 'a' has shape (3,) F32 (12 bytes) but data_offsets [0, 8] (8 bytes)"},
      {"f64 read as f32", one("\"F64\"", "[2]", "[0,8]"), "(16 bytes) but data_offsets [0, 8]"},
      // offsets
      {"one offset", one("\"F32\"", "[2]", "[8]"), "data_offsets [8], not [begin, end]"},
      {"negative offset", one("\"F32\"", "[2]", "[-8,0]"),
       "not [begin, end] with non-negative integers"},
      {"float offset", one("\"F32\"", "[2]", "[0,8.0]"), "not [begin, end]"},
      {"end before begin", one("\"F32\"", "[0]", "[8,0]"),
       "data_offsets [8, 0] that end before they begin"},
      {"not from 0", one("\"F32\"", "[2]", "[8,16]", 16), "the data does not start at offset 0"},
      {"overlap", with_a(entry("b", "\"F32\"", "[2]", "[4,12]"), 12),
       "tensor 'b' has data_offsets [4, 12] that overlap those of tensor 'a' [0, 8]"},
      {"same offsets", with_a(entry("b", "\"F32\"", "[2]", "[0,8]"), 8), "overlap"},
      {"gap", with_a(entry("b", "\"F32\"", "[2]", "[12,20]"), 20),
       "a gap of 4 bytes in the data between tensor 'a' [0, 8] and tensor 'b' [12, 20]"},
      {"truncated data", ok.substr(0, ok.size() - 3),
       "tensor 'a' has data_offsets [0, 8] past the end of the data (5 bytes)"},
      {"offsets far past the data", one("\"F32\"", "[2]", "[1000000,1000008]"),
       "past the end of the data (8 bytes)"},
      {"trailing bytes", ok + "abcd", "4 trailing bytes after the tensors' data"},
      {"data but no tensors", st_file("{}", "x"), "1 trailing byte after"},
      // metadata
      {"metadata value a number", st_file(R"({"__metadata__":{"k":1}})"),
       "metadata 'k' is 1, not a string"},
      {"metadata value null", st_file(R"({"__metadata__":{"k":null}})"), "metadata 'k' is null"},
      {"metadata an array", st_file(R"({"__metadata__":[]})"),
       "'__metadata__' is [], not an object"},
      {"duplicate metadata", st_file(R"({"__metadata__":{},"__metadata__":{}})"),
       "duplicate key '__metadata__' in the header"},
      {"duplicate metadata key", st_file(R"({"__metadata__":{"k":"1","k":"2"}})"),
       "duplicate key 'k'"},
  };
}

TEST(SafeTensors, RejectsMalformedFiles) {
  for (const BadFile& row : bad_files()) {
    SCOPED_TRACE(row.label);
    try {
      parse_safetensors(row.bytes, "bad.safetensors");
      ADD_FAILURE() << "no IoError";
    } catch (const IoError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.starts_with("bad.safetensors: ")) << m;
      EXPECT_NE(m.find(row.fragment), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(SafeTensors, RejectsAHeaderOver100MB) {
  std::string bytes = le64(100'000'001);
  bytes.resize(8 + 100'000'001, ' ');
  try {
    parse_safetensors(bytes, "big.safetensors");
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              "big.safetensors: header length 100000001 is over the limit of 100000000 bytes");
  }
}

}  // namespace
}  // namespace tg
