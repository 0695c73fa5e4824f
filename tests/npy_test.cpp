// .npy reading and writing: round trips, hand-built headers of every version, a table of files
// that must be rejected, atomic writes, and interchange with real numpy (skipped without it).

#include "io/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace tg {
namespace {

namespace fs = std::filesystem;

// ---- building .npy bytes by hand ----------------------------------------------------------

// Magic, version and a little-endian header length of `length_bytes` bytes.
std::string preamble(int major, int minor, uint64_t header_len, int length_bytes) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  return out;
}

// A well-formed file around `dict`: padded with spaces and a '\n' to a 64-byte data offset.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + length_bytes;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return preamble(major, 0, header.size(), length_bytes) + header + data;
}

std::string dict(const std::string& descr, const std::string& shape,
                 const std::string& fortran = "False") {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::vector<double> iota(int64_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) * scale;
  return v;
}

std::string f64_bytes(int64_t n) { return raw_bytes(iota(n, 0.5)); }

// ---- files --------------------------------------------------------------------------------

// A fresh directory for one test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tapegrad_npy_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    return names;
  }

 private:
  fs::path path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

bool have_numpy() {
  static const bool ok = std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
  return ok;
}

// Runs a python script with the directory as argv[1]; false (and the output in *log) on failure.
bool run_python(const TempDir& dir, const std::string& script, std::string* log) {
  spit(dir.file("script.py"), script);
  const std::string cmd = "/usr/bin/python3 '" + dir.file("script.py") + "' '" +
                          dir.path().string() + "' >'" + dir.file("python.log") + "' 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  *log = slurp(dir.file("python.log"));
  return ok;
}

std::string message_of(const std::string& bytes, const std::string& name) {
  try {
    read_npy_bytes(bytes, name);
  } catch (const IoError& e) {
    return e.what();
  }
  return "(no IoError)";
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.impl().storage->data(), b.impl().storage->data(),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

// ---- round trips --------------------------------------------------------------------------

TEST(Npy, RoundTripsEveryRankAndDtype) {
  TempDir dir;
  Rng rng(7);
  const std::vector<Shape> shapes = {{},        {5},       {1},          {0},
                                     {0, 3},    {3, 0},    {2, 3},       {1, 7},
                                     {2, 3, 4}, {2, 0, 4}, {1, 2, 3, 4}, {2, 1, 3, 2}};
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(shape.str() + " " + dtype_name(dtype));
      const Tensor x = randn(shape, rng, dtype);
      const std::string path = dir.file("x.npy");
      write_npy(path, x);
      const Tensor y = read_npy(path);
      EXPECT_TRUE(same_bytes(x, y)) << x.str() << "\nvs\n" << y.str();

      // numpy's layout: v1.0, the data at a multiple of 64, the header ending in '\n'.
      const std::string bytes = slurp(path);
      ASSERT_GE(bytes.size(), 10u);
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t data_start =
          10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
      EXPECT_EQ(data_start % 64, 0u);
      EXPECT_EQ(bytes[data_start - 1], '\n');
      EXPECT_EQ(bytes.size(), data_start + x.numel() * dtype_size(dtype));
    }
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.npy"});  // no temporary files left
}

TEST(Npy, RoundTripKeepsSpecialValuesBitExact) {
  TempDir dir;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {std::nan(""), inf, -inf, -0.0, 4.9e-324, 1.7976931348623157e308};
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = from_vector(v, {2, 3}, dtype);
    write_npy(dir.file("s.npy"), x);
    EXPECT_TRUE(same_bytes(x, read_npy(dir.file("s.npy"))));
  }
}

TEST(Npy, WritesTheHeaderNumpyWrites) {
  TempDir dir;
  write_npy(dir.file("h.npy"), zeros({2, 3}, Dtype::f32));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string padding(128 - 10 - dict.size() - 1, ' ');  // 10 + 60 + 1 rounds up to 128
  const std::string expected =
      preamble(1, 0, 118, 2) + dict + padding + "\n" + std::string(6 * 4, '\0');
  EXPECT_EQ(slurp(dir.file("h.npy")), expected);
}

TEST(Npy, OverwritesAnExistingFile) {
  TempDir dir;
  write_npy(dir.file("o.npy"), ones({4, 4}));
  write_npy(dir.file("o.npy"), full({2}, 3.0, Dtype::f32));
  const Tensor y = read_npy(dir.file("o.npy"));
  EXPECT_EQ(y.shape(), Shape({2}));
  EXPECT_EQ(y.to_vector(), (std::vector<double>{3.0, 3.0}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"o.npy"});
}

TEST(Npy, RoundTripsInt64) {
  TempDir dir;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::pair<std::vector<int64_t>, Shape>> cases = {
      {{kMin, -1, 0, 1, kMax, int64_t{1} << 40}, {2, 3}},
      {{7}, {}},
      {{}, {0, 4}},
      {{3, 1, 4, 1}, {1, 2, 2, 1}}};
  for (const auto& [values, shape] : cases) {
    SCOPED_TRACE(shape.str());
    const Tensor x = from_indices(values, shape);
    write_npy(dir.file("i.npy"), x);
    const Tensor y = read_npy(dir.file("i.npy"), NpyAccept::floats_and_ints);
    EXPECT_TRUE(same_bytes(x, y));
    EXPECT_NE(slurp(dir.file("i.npy")).find("'descr': '<i8'"), std::string::npos);
    // Integers are opt-in: the default reader still refuses them.
    EXPECT_THROW(read_npy(dir.file("i.npy")), IoError);
  }
}

TEST(Npy, ReadsInt32WidenedToInt64) {
  const std::vector<int32_t> v = {std::numeric_limits<int32_t>::min(), -1, 0, 1, 65,
                                  std::numeric_limits<int32_t>::max()};
  for (int major : {1, 2, 3}) {
    SCOPED_TRACE("version " + std::to_string(major) + ".0");
    const Tensor t = read_npy_bytes(npy(dict("'<i4'", "(3, 2)"), raw_bytes(v), major), "i4.npy",
                                    NpyAccept::floats_and_ints);
    EXPECT_EQ(t.dtype(), Dtype::i64);
    EXPECT_EQ(t.shape(), Shape({3, 2}));
    EXPECT_EQ(std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + 6),
              std::vector<int64_t>(v.begin(), v.end()));
  }
  const Tensor empty = read_npy_bytes(npy(dict("'<i4'", "(0, 2)"), ""), "i4.npy",
                                      NpyAccept::floats_and_ints);
  EXPECT_EQ(empty.shape(), Shape({0, 2}));
}

// ---- reading hand-built headers -----------------------------------------------------------

TEST(Npy, ReadsVersion2And3Headers) {
  const std::vector<float> v32 = {1.5f, -2.25f, 3.0f, 0.125f};
  for (int major : {2, 3}) {
    SCOPED_TRACE("version " + std::to_string(major) + ".0");
    const Tensor a = read_npy_bytes(npy(dict("'<f8'", "(2, 3)"), f64_bytes(6), major), "v.npy");
    EXPECT_EQ(a.shape(), Shape({2, 3}));
    EXPECT_EQ(a.dtype(), Dtype::f64);
    EXPECT_EQ(a.to_vector(), iota(6, 0.5));

    const Tensor b = read_npy_bytes(npy(dict("'<f4'", "(4,)"), raw_bytes(v32), major), "v.npy");
    EXPECT_EQ(b.dtype(), Dtype::f32);
    EXPECT_EQ(b.to_vector(), (std::vector<double>{1.5, -2.25, 3.0, 0.125}));
  }
}

TEST(Npy, AcceptsHeaderSpellingsNumpyAccepts) {
  struct Row {
    const char* label;
    std::string dict;
    Shape shape;
  };
  const std::vector<Row> rows = {
      {"numpy's own", dict("'<f8'", "(2, 3)"), {2, 3}},
      {"keys reordered", "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f8'}", {2, 3}},
      {"no trailing comma", "{'descr': '<f8', 'fortran_order': False, 'shape': (6,)}", {6}},
      {"double quotes",
       "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3, 2)}",
       {3, 2}},
      {"odd whitespace",
       "{ 'descr' :'<f8' ,\n\t'fortran_order':False,'shape':( 1 , 6 , ) , }",
       {1, 6}},
      {"rank 0", dict("'<f8'", "()"), {}},
      {"rank 4", dict("'<f8'", "(1, 1, 2, 3)"), {1, 1, 2, 3}},
      {"empty with huge other dim", dict("'<f8'", "(0, 1000000000000)"), {0, 1000000000000}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    const std::string data = f64_bytes(row.shape.numel());
    try {
      const Tensor t = read_npy_bytes(npy(row.dict, data), "ok.npy");
      EXPECT_EQ(t.shape(), row.shape);
      EXPECT_EQ(t.to_vector(), iota(row.shape.numel(), 0.5));
      // Without padding too (numpy before 1.16 aligned to 16 bytes; the reader needs none).
      const std::string bare = row.dict + "\n";
      const Tensor u = read_npy_bytes(preamble(1, 0, bare.size(), 2) + bare + data, "ok.npy");
      EXPECT_EQ(u.shape(), row.shape);
    } catch (const IoError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// ---- rejections ---------------------------------------------------------------------------

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
      {"rank 5", with_shape("(1, 1, 2, 3, 1)"), "shape (1, 1, 2, 3, 1) has rank 5; at most 4"},
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
    std::string msg = "(no IoError)";
    try {
      read_npy_bytes(row.bytes, "bad.npy", NpyAccept::floats_and_ints);
    } catch (const IoError& e) {
      msg = e.what();
    }
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

TEST(Npy, UnreadableFilesNameThePath) {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  try {
    read_npy(missing);
    ADD_FAILURE() << "no IoError for a missing file";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": cannot open: No such file or directory");
  }
  EXPECT_THROW(read_npy(dir.path().string()), IoError);  // a directory

  spit(dir.file("cut.npy"), npy(dict("'<f8'", "(8, 4)"), f64_bytes(12)));
  try {
    read_npy(dir.file("cut.npy"));
    ADD_FAILURE() << "no IoError for a truncated file";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("cut.npy") + ": data has 96 bytes, shape (8, 4) float64 needs 256");
  }
}

// ---- atomic writes ------------------------------------------------------------------------

TEST(Npy, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  const std::string into_missing_dir = dir.file("no/such/dir/Y.npy");
  try {
    write_npy(into_missing_dir, ones({2, 2}));
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(into_missing_dir + ": ", 0), 0u) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());

  // The rename fails when the target is a directory: no temporary file may remain.
  fs::create_directory(dir.file("taken"));
  EXPECT_THROW(write_npy(dir.file("taken"), ones({2, 2})), IoError);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"});
  EXPECT_TRUE(fs::is_empty(dir.file("taken")));
}

// ---- interchange with numpy ---------------------------------------------------------------

TEST(NpyNumpy, ReadsFilesNumpyWrote) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  TempDir dir;
  const std::string script = R"(
import os, sys
import numpy as np
d = sys.argv[1]
def save(name, a, version=None):
    with open(os.path.join(d, name), 'wb') as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)
save('c64.npy', np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.25 - 1.5)
save('c32.npy', (np.arange(12) / 7).astype('<f4').reshape(3, 4))
save('r4.npy', np.arange(120, dtype=np.float64).reshape(2, 3, 4, 5) / 3)
save('r0.npy', np.array(2.5))
save('r1.npy', np.arange(5, dtype=np.float32))
save('empty.npy', np.zeros((0, 3)))
save('v2.npy', np.arange(6, dtype=np.float64).reshape(2, 3), version=(2, 0))
save('v3.npy', np.arange(6, dtype=np.float32).reshape(3, 2), version=(3, 0))
save('fortran.npy', np.asfortranarray(np.arange(6.0).reshape(2, 3)))
save('int64.npy', np.arange(6, dtype='<i8'))
save('int32.npy', (np.arange(6, dtype='<i4') - 3).reshape(2, 3))
save('int16.npy', np.arange(6, dtype='<i2'))
save('big.npy', np.arange(3, dtype='>f8'))
save('f16.npy', np.arange(3, dtype='<f2'))
)";
  std::string log;
  ASSERT_TRUE(run_python(dir, script, &log)) << log;

  struct Good {
    const char* file;
    Shape shape;
    Dtype dtype;
    std::vector<double> values;
  };
  std::vector<double> c32, r4;
  for (int i = 0; i < 12; ++i) c32.push_back(static_cast<float>(i / 7.0));
  for (int i = 0; i < 120; ++i) r4.push_back(i / 3.0);
  std::vector<double> c64 = iota(24, 0.25);
  for (double& x : c64) x -= 1.5;
  const std::vector<Good> good = {
      {"c64.npy", {2, 3, 4}, Dtype::f64, c64},  {"c32.npy", {3, 4}, Dtype::f32, c32},
      {"r4.npy", {2, 3, 4, 5}, Dtype::f64, r4}, {"r0.npy", {}, Dtype::f64, {2.5}},
      {"r1.npy", {5}, Dtype::f32, iota(5)},     {"empty.npy", {0, 3}, Dtype::f64, {}},
      {"v2.npy", {2, 3}, Dtype::f64, iota(6)},  {"v3.npy", {3, 2}, Dtype::f32, iota(6)},
  };
  for (const Good& g : good) {
    SCOPED_TRACE(g.file);
    try {
      const Tensor t = read_npy(dir.file(g.file));
      EXPECT_EQ(t.shape(), g.shape);
      EXPECT_EQ(t.dtype(), g.dtype);
      EXPECT_EQ(t.to_vector(), g.values);
    } catch (const IoError& e) {
      ADD_FAILURE() << e.what();
    }
  }

  const std::vector<std::pair<const char*, const char*>> bad = {
      {"fortran.npy", "Fortran-order arrays are not supported"},
      {"int64.npy", "unsupported dtype '<i8'"},
      {"big.npy", "unsupported dtype '>f8' (big-endian)"},
      {"f16.npy", "unsupported dtype '<f2'"},
  };
  for (const auto& [file, fragment] : bad) {
    SCOPED_TRACE(file);
    try {
      read_npy(dir.file(file));
      ADD_FAILURE() << "no IoError";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }

  const Tensor i64 = read_npy(dir.file("int64.npy"), NpyAccept::floats_and_ints);
  EXPECT_EQ(i64.dtype(), Dtype::i64);
  EXPECT_EQ(i64.to_vector(), iota(6));
  const Tensor i32 = read_npy(dir.file("int32.npy"), NpyAccept::floats_and_ints);
  EXPECT_EQ(i32.dtype(), Dtype::i64);
  EXPECT_EQ(i32.shape(), Shape({2, 3}));
  EXPECT_EQ(i32.to_vector(), (std::vector<double>{-3, -2, -1, 0, 1, 2}));
  EXPECT_THROW(read_npy(dir.file("int16.npy"), NpyAccept::floats_and_ints), IoError);
}

TEST(NpyNumpy, NumpyReadsFilesWeWrote) {
  if (!have_numpy()) GTEST_SKIP() << "python3 with numpy not available";
  TempDir dir;
  Rng rng(11);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"a", randn({2, 3, 4}, rng)},
      {"b", randn({5}, rng, Dtype::f32)},
      {"c", scalar(-0.75)},
      {"d", zeros({0, 3}, Dtype::f32)},
      {"e", randn({1, 2, 3, 2}, rng, Dtype::f32)},
      {"f", randn({3, 1}, rng)},
      {"g", from_indices({-5, 0, 7, int64_t{1} << 40}, {2, 2})},
  };
  for (const auto& [name, t] : tensors) write_npy(dir.file(name + ".npy"), t);

  // One line per file: name, dtype, shape, format version, whether np.save writes the very same
  // bytes, then every value in hex (exact).
  const std::string script = R"(
import io, os, sys
import numpy as np
d = sys.argv[1]
with open(os.path.join(d, 'seen.txt'), 'w') as out:
    for name in 'abcdefg':
        path = os.path.join(d, name + '.npy')
        with open(path, 'rb') as f:
            version = np.lib.format.read_magic(f)
        a = np.load(path, allow_pickle=False)
        assert a.flags.c_contiguous
        mine = open(path, 'rb').read()
        theirs = io.BytesIO()
        np.save(theirs, a)
        same = 'same' if mine == theirs.getvalue() else 'differs'
        values = ' '.join(float(x).hex() for x in a.ravel().tolist())
        print(name, a.dtype.str, str(a.shape).replace(' ', ''), '%d.%d' % version, same, values,
              file=out)
)";
  std::string log;
  ASSERT_TRUE(run_python(dir, script, &log)) << log;

  std::istringstream seen(slurp(dir.file("seen.txt")));
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    std::string line, file, descr, shape, version, same, word;
    ASSERT_TRUE(std::getline(seen, line));
    std::istringstream in(line);
    in >> file >> descr >> shape >> version >> same;
    EXPECT_EQ(file, name);
    EXPECT_EQ(descr, t.dtype() == Dtype::f32 ? "<f4" : t.dtype() == Dtype::f64 ? "<f8" : "<i8");
    std::string expected_shape = t.shape().str();
    std::erase(expected_shape, ' ');
    EXPECT_EQ(shape, expected_shape);
    EXPECT_EQ(version, "1.0");
    EXPECT_EQ(same, "same");
    std::vector<double> values;
    while (in >> word) values.push_back(std::strtod(word.c_str(), nullptr));
    EXPECT_EQ(values, t.to_vector());
  }
}

}  // namespace
}  // namespace tg
