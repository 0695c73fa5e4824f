// .npy files that must be rejected: a table of malformed files (each one line naming the file
// and the problem), bad integer files, and every prefix of a good file.

#include <tapegrad/io/npy.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "npy_util.h"
#include "test_util.h"

namespace tg {
namespace {

using test::dict;
using test::f64_bytes;
using test::iota;
using test::npy;
using test::preamble;

std::string message_of(const std::string& bytes, const std::string& name) {
  return test::message_of<IoError>([&] { read_npy_bytes(bytes, name); });
}

struct BadFile {
  const char* label;
  std::string bytes;
  const char* fragment;  // expected in the message
};

std::vector<BadFile> bad_files() {
  const std::string ok_dict = dict("'<f8'", "(2, 3)");
  const std::string header = ok_dict + "\n";
  const auto with_dict = [](const std::string& d) { return npy(d, f64_bytes(6)); };
  const auto with_descr = [](const std::string& descr) {
    return npy(dict(descr, "(2, 3)"), f64_bytes(6));
  };
  const auto with_shape = [](const std::string& shape, int64_t n = 6) {
    return npy(dict("'<f8'", shape), f64_bytes(n));
  };
  std::string nested = "1";
  for (int i = 0; i < 20; ++i) nested = "(" + nested + ",)";
  return {
      // preamble
      {"empty file", "", "the file is empty"},
      {"text file", "hello, world\n", "bad magic"},
      {"bad magic", std::string("\x93NUMPX\x01\x00\x40\x00", 10) + header, "bad magic"},
      {"magic cut short", std::string("\x93NUM", 4), "bad magic"},
      {"no version", std::string("\x93NUMPY\x01", 7), "ends inside the .npy preamble"},
      {"no header length", std::string("\x93NUMPY\x01\x00\x40", 9),
       "ends inside the .npy preamble"},
      {"v2 short length", std::string("\x93NUMPY\x02\x00\x40\x00\x00", 11),
       "ends inside the .npy preamble"},
      {"version 4.0", preamble(4, 0, header.size(), 4) + header + f64_bytes(6),
       "unsupported .npy format version 4.0"},
      {"version 1.1", preamble(1, 1, header.size(), 2) + header + f64_bytes(6),
       "unsupported .npy format version 1.1"},
      {"version 0.0", preamble(0, 0, header.size(), 2) + header + f64_bytes(6),
       "unsupported .npy format version 0.0"},
      {"header length beyond the file", preamble(1, 0, 1000, 2) + header,
       "header length 1000 goes past the end of the file"},
      {"v2 header length 4 GiB", preamble(2, 0, 0xFFFFFFFFu, 4) + header,
       "header length 4294967295 goes past the end of the file"},
      // the dict's syntax
      {"no final newline", preamble(1, 0, ok_dict.size(), 2) + ok_dict + f64_bytes(6),
       "does not end with a newline"},
      {"empty header", preamble(1, 0, 0, 2), "does not end with a newline"},
      {"not a dict", with_dict("[1, 2]"), "malformed header: expected '{'"},
      {"unclosed dict", with_dict("{'descr': '<f8', 'fortran_order': False"),
       "malformed header: expected ',' or '}'"},
      {"header ends in a value", with_dict("{'descr': "),
       "malformed header: a value is missing at the end of the header"},
      {"missing colon", with_dict("{'descr' '<f8', 'fortran_order': False, 'shape': (2, 3)}"),
       "malformed header: expected ':'"},
      {"missing comma", with_dict("{'descr': '<f8' 'fortran_order': False, 'shape': (2, 3)}"),
       "malformed header: expected ',' or '}'"},
      {"unclosed tuple", with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3}"),
       "malformed header: expected ',' or ')'"},
      {"empty tuple item", with_shape("(,)"), "malformed header: unexpected ','"},
      {"unterminated string", with_dict("{'descr: '<f8'}"), "malformed header: expected ':'"},
      {"string to the end", with_dict("{'descr"), "malformed header: unterminated string"},
      {"escape in string", with_descr("'<f\\x38'"), "escape sequences"},
      {"unknown name", with_dict("{'descr': '<f8', 'fortran_order': false, 'shape': (2, 3)}"),
       "malformed header: unknown name 'false'"},
      {"key not a string", with_dict("{1: 2}"), "malformed header: a key is not a string"},
      {"text after the dict", with_dict(ok_dict + " x"), "unexpected text after the dict"},
      {"two dicts", with_dict(ok_dict + ok_dict), "unexpected text after the dict"},
      {"deep nesting", with_shape(nested), "nesting deeper than 8"},
      {"control byte", with_dict("{'descr': '<f8',\x01 'shape': (2, 3)}"),
       "malformed header: unexpected '\\x01'"},
      {"nul byte", with_dict(std::string("{\0}", 3)), "malformed header: unexpected '\\x00'"},
      // the keys
      {"no descr", with_dict("{'fortran_order': False, 'shape': (2, 3)}"),
       "the header has no 'descr' key"},
      {"no fortran_order", with_dict("{'descr': '<f8', 'shape': (2, 3)}"),
       "the header has no 'fortran_order' key"},
      {"no shape", with_dict("{'descr': '<f8', 'fortran_order': False}"),
       "the header has no 'shape' key"},
      {"empty dict", with_dict("{}"), "the header has no 'descr' key"},
      {"unknown key", with_dict("{'descr': '<f8', 'fortran_order': False, 'dtype': 1}"),
       "unexpected key 'dtype'"},
      {"duplicate key",
       with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,)}"),
       "duplicate key 'shape'"},
      {"fortran order", npy(dict("'<f8'", "(2, 3)", "True"), f64_bytes(6)),
       "Fortran-order arrays are not supported"},
      {"fortran_order 0", npy(dict("'<f8'", "(2, 3)", "0"), f64_bytes(6)),
       "'fortran_order' is 0, not True or False"},
      {"fortran_order None", npy(dict("'<f8'", "(2, 3)", "None"), f64_bytes(6)),
       "'fortran_order' is None, not True or False"},
      // dtypes
      {"int64", with_descr("'<i8'"), "unsupported dtype '<i8'; only '<f4' and '<f8'"},
      {"float16", with_descr("'<f2'"), "unsupported dtype '<f2'"},
      {"bool", with_descr("'|b1'"), "unsupported dtype '|b1'"},
      {"complex128", with_descr("'<c16'"), "unsupported dtype '<c16'"},
      {"object", with_descr("'|O'"), "unsupported dtype '|O'"},
      {"big-endian f8", with_descr("'>f8'"), "unsupported dtype '>f8' (big-endian)"},
      {"big-endian f4", with_descr("'>f4'"), "unsupported dtype '>f4' (big-endian)"},
      {"no byte order", with_descr("'f8'"), "unsupported dtype 'f8'"},
      {"native byte order", with_descr("'=f8'"), "unsupported dtype '=f8'"},
      {"bar f8", with_descr("'|f8'"), "unsupported dtype '|f8'"},
      {"dtype name", with_descr("'float64'"), "unsupported dtype 'float64'"},
      {"utf-8 descr in a 3.0 header", npy(dict("'\xc3\xa9'", "(2, 3)"), f64_bytes(6), 3),
       "unsupported dtype '\\xc3\\xa9'"},
      {"structured", with_descr("[('a', '<f8'), ('b', '<f8')]"),
       "unsupported structured dtype [('a', '<f8'), ('b', '<f8')]"},
      {"descr not a string", with_descr("8"), "'descr' is 8, not a dtype string"},
      // shapes
      {"rank 7", with_shape("(1, 1, 2, 3, 1, 1, 1)"),
       "shape (1, 1, 2, 3, 1, 1, 1) has rank 7; at most 6"},
      {"shape a list", with_shape("[2, 3]"), "'shape' is [2, 3], not a tuple"},
      {"shape parenthesised int", with_shape("(6)"), "'shape' is (6), not a tuple"},
      {"shape an int", with_shape("6"), "'shape' is 6, not a tuple"},
      {"negative dimension", with_shape("(-2, -3)"), "has a negative dimension -2"},
      {"float dimension", with_shape("(2.5, 2)"), "has a non-integer dimension 2.5"},
      {"exponent dimension", with_shape("(6e0,)"), "has a non-integer dimension 6e0"},
      {"string dimension", with_shape("('6',)"), "has a non-integer dimension '6'"},
      {"None dimension", with_shape("(None, 6)"), "has a non-integer dimension None"},
      {"nested dimension", with_shape("((6,),)"), "has a non-integer dimension (6,)"},
      {"dimension beyond 64 bits", with_shape("(99999999999999999999,)"),
       "has a dimension beyond 64 bits: 99999999999999999999"},
      {"product overflows", with_shape("(4294967296, 4294967296)"),
       "shape (4294967296, 4294967296) is too large: its element count overflows 64 bits"},
      {"bytes overflow", with_shape("(2305843009213693952,)"), "overflows 64 bits"},
      {"overflow beside a zero", with_shape("(0, 4611686018427387904, 4)"), "overflows 64 bits"},
      // the data
      {"truncated", with_shape("(8, 4)", 12), "data has 96 bytes, shape (8, 4) float64 needs 256"},
      {"no data", with_shape("(2, 3)", 0), "data has 0 bytes, shape (2, 3) float64 needs 48"},
      {"scalar without data", with_shape("()", 0), "data has 0 bytes, shape () float64 needs 8"},
      {"lying huge shape", npy(dict("'<f4'", "(1099511627776, 1048576)"), f64_bytes(2)),
       "data has 16 bytes, shape (1099511627776, 1048576) float32 needs 4611686018427387904"},
      {"trailing bytes", with_shape("(2,)", 3),
       "data has 24 bytes, shape (2,) float64 needs 16 (trailing bytes after the data)"},
      {"data for an empty shape", with_shape("(0, 3)", 1),
       "data has 8 bytes, shape (0, 3) float64 needs 0"},
      {"one stray byte", npy(ok_dict, f64_bytes(6) + "x"),
       "data has 49 bytes, shape (2, 3) float64 needs 48 (trailing bytes after the data)"},
  };
}

TEST(Npy, RejectsBadFiles) {
  for (const BadFile& row : bad_files()) {
    SCOPED_TRACE(row.label);
    const std::string msg = message_of(row.bytes, "bad.npy");
    EXPECT_EQ(msg.rfind("bad.npy: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(row.fragment), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// With integers accepted: the integer kinds beside '<i4' and '<i8', other byte orders and bad
// sizes are still rejected, and floats still read.
TEST(Npy, RejectsBadIntegerFiles) {
  const auto with_descr = [](const std::string& descr, const std::string& data) {
    return npy(dict(descr, "(2, 3)"), data);
  };
  const std::string i4_data(24, '\0'), i8_data(48, '\0');
  const std::vector<BadFile> rows = {
      {"int16", with_descr("'<i2'", std::string(12, '\0')),
       "unsupported dtype '<i2'; only '<f4', '<f8', '<i4' and '<i8' are supported"},
      {"int8", with_descr("'|i1'", std::string(6, '\0')), "unsupported dtype '|i1'"},
      {"uint64", with_descr("'<u8'", i8_data), "unsupported dtype '<u8'"},
      {"uint32", with_descr("'<u4'", i4_data), "unsupported dtype '<u4'"},
      {"bool", with_descr("'|b1'", std::string(6, '\0')), "unsupported dtype '|b1'"},
      {"big-endian i8", with_descr("'>i8'", i8_data), "unsupported dtype '>i8' (big-endian)"},
      {"big-endian i4", with_descr("'>i4'", i4_data), "unsupported dtype '>i4' (big-endian)"},
      {"no byte order", with_descr("'i8'", i8_data), "unsupported dtype 'i8'"},
      {"native byte order", with_descr("'=i4'", i4_data), "unsupported dtype '=i4'"},
      {"dtype name", with_descr("'int64'", i8_data), "unsupported dtype 'int64'"},
      {"structured", with_descr("[('a', '<i8')]", i8_data),
       "unsupported structured dtype [('a', '<i8')]; only '<f4', '<f8', '<i4' and '<i8'"},
      {"int32 truncated", with_descr("'<i4'", std::string(20, '\0')),
       "data has 20 bytes, shape (2, 3) int32 needs 24"},
      {"int32 with int64 data", with_descr("'<i4'", i8_data),
       "data has 48 bytes, shape (2, 3) int32 needs 24 (trailing bytes after the data)"},
      {"int64 truncated", with_descr("'<i8'", i4_data),
       "data has 24 bytes, shape (2, 3) int64 needs 48"},
      {"int64 overflow", npy(dict("'<i8'", "(2305843009213693952,)"), ""), "overflows 64 bits"},
      {"fortran int64", npy(dict("'<i8'", "(2, 3)", "True"), i8_data),
       "Fortran-order arrays are not supported"},
  };
  for (const BadFile& row : rows) {
    SCOPED_TRACE(row.label);
    const std::string msg = test::message_of<IoError>(
        [&] { read_npy_bytes(row.bytes, "bad.npy", NpyAccept::floats_and_ints); });
    EXPECT_EQ(msg.rfind("bad.npy: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(row.fragment), std::string::npos) << msg;
  }
  const Tensor f = read_npy_bytes(npy(dict("'<f8'", "(2, 3)"), f64_bytes(6)), "f.npy",
                                  NpyAccept::floats_and_ints);
  EXPECT_EQ(f.dtype(), Dtype::f64);
  EXPECT_EQ(f.to_vector(), iota(6, 0.5));
}

TEST(Npy, TruncatedDataMessageIsExact) {
  const std::string bytes = npy(dict("'<f8'", "(8, 4)"), f64_bytes(12));
  EXPECT_EQ(message_of(bytes, "X.npy"), "X.npy: data has 96 bytes, shape (8, 4) float64 needs 256");
}

TEST(Npy, EveryPrefixOfAGoodFileIsRejected) {
  const std::string good = npy(dict("'<f4'", "(2, 3)"), std::string(24, '\0'));
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE("first " + std::to_string(n) + " bytes");
    EXPECT_THROW(read_npy_bytes(good.substr(0, n), "cut.npy"), IoError);
  }
  EXPECT_NO_THROW(read_npy_bytes(good, "cut.npy"));
}

}  // namespace
}  // namespace tg
