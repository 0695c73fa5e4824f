// .npy reading and writing: round trips, hand-built headers of every version, files that cannot
// be read, atomic writes. Malformed files are in npy_reject_test.cpp, numpy in npy_numpy_test.cpp.

#include <tapegrad/io/npy.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "npy_util.h"
#include "test_util.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::dict;
using test::f64_bytes;
using test::iota;
using test::npy;
using test::preamble;
using test::raw_bytes;
using test::same_bytes;
using test::slurp;
using test::spit;
using test::TempDir;

// ---- round trips --------------------------------------------------------------------------

TEST(Npy, RoundTripsEveryRankAndDtype) {
  TempDir dir;
  Rng rng(7);
  const std::vector<Shape> shapes = {{},        {5},       {1},          {0},
                                     {0, 3},    {3, 0},    {2, 3},       {1, 7},
                                     {2, 3, 4}, {2, 0, 4}, {1, 2, 3, 4}, {2, 1, 3, 2},
                                     {2, 1, 3, 1, 2},       {1, 2, 1, 3, 2, 2},
                                     {2, 1, 0, 1, 1, 3}};
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
      {"rank 6", dict("'<f8'", "(1, 1, 2, 1, 3, 1)"), {1, 1, 2, 1, 3, 1}},
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

// ---- files that cannot be read ------------------------------------------------------------

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

}  // namespace
}  // namespace tg
