// .safetensors reading and writing: round trips of every dtype and rank, the reference layout,
// a table of files that must be rejected, atomic writes. Interchange with Python is in
// safetensors_python_test.cpp.

#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tg {
namespace {

namespace fs = std::filesystem;
using Metadata = std::map<std::string, std::string>;

// A fresh directory for one test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tapegrad_st_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
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
    std::sort(names.begin(), names.end());
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

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// A file around `header` as given (no padding: the reader needs none).
std::string st_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.impl().storage->data(), b.impl().storage->data(),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

void expect_same(const NamedTensors& expected, const NamedTensors& got) {
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

// One tensor of every dtype and rank 0-4, empty ones among them, and values that must survive
// bit for bit.
NamedTensors sample_tensors() {
  Rng rng(5);
  const double inf = std::numeric_limits<double>::infinity();
  NamedTensors out = {
      {"scalar.f64", scalar(-0.75)},
      {"scalar.f32", scalar(3.5, Dtype::f32)},
      {"scalar.i64", from_indices({-7}, {})},
      {"vec.f32", randn({5}, rng, Dtype::f32)},
      {"vec.i64", from_indices({0, -1, INT64_MAX, INT64_MIN, 1LL << 53}, {5})},
      {"special.f64", from_vector({std::nan(""), inf, -inf, -0.0, 4.9e-324, 1e308}, {2, 3})},
      {"special.f32", from_vector({std::nan(""), inf, -inf, -0.0}, {4}, Dtype::f32)},
      {"mat.f64", randn({3, 4}, rng)},
      {"empty.f32", zeros({0, 3}, Dtype::f32)},
      {"rank3.f32", randn({2, 3, 4}, rng, Dtype::f32)},
      {"empty.i64", from_indices({}, {2, 0, 4})},
      {"rank4.f64", randn({1, 2, 3, 2}, rng)},
      {"rank4.i64", from_indices({1, 2, 3, 4, 5, 6}, {2, 1, 3, 1})},
      {"empty.f64", zeros({0}, Dtype::f64)},
  };
  return out;
}

const Metadata kMetadata = {
    {"tapegrad.config", R"({"n_layer": 2, "n_head": 4, "gelu": "tanh"})"},
    {"tapegrad.vocab", "\n !'abc\\\"\xc3\xa9"},
    {"empty", ""},
};

TEST(SafeTensors, RoundTripsEveryRankAndDtype) {
  TempDir dir;
  const NamedTensors tensors = sample_tensors();
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, kMetadata);
  const SafeTensors back = read_safetensors(path);
  expect_same(tensors, back.tensors);
  EXPECT_EQ(back.metadata, kMetadata);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});  // no temporaries

  // The same bytes from memory.
  EXPECT_EQ(slurp(path), serialize_safetensors(tensors, kMetadata));
  expect_same(tensors, parse_safetensors(slurp(path), "m").tensors);
}

TEST(SafeTensors, RoundTripsNothingAndOneEmptyTensor) {
  TempDir dir;
  write_safetensors(dir.file("none.safetensors"), {});
  EXPECT_EQ(slurp(dir.file("none.safetensors")), le64(8) + "{}      ");
  const SafeTensors none = read_safetensors(dir.file("none.safetensors"));
  EXPECT_TRUE(none.tensors.empty());
  EXPECT_TRUE(none.metadata.empty());

  const NamedTensors empty = {{"e", zeros({0, 2})}};
  write_safetensors(dir.file("e.safetensors"), empty, {{"k", "v"}});
  const SafeTensors back = read_safetensors(dir.file("e.safetensors"));
  expect_same(empty, back.tensors);
  EXPECT_EQ(back.metadata, (Metadata{{"k", "v"}}));
}

TEST(SafeTensors, WritesTheReferenceLayout) {
  const NamedTensors t = {{"b", from_vector({1, 2}, {2}, Dtype::f32)},
                          {"a", from_indices({5}, {1})}};
  const std::string json_b = R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string json_a = R"("a":{"dtype":"I64","shape":[1],"data_offsets":[8,16]})";
  const float b_values[] = {1.0f, 2.0f};
  const int64_t a_value = 5;
  const std::string data = std::string(reinterpret_cast<const char*>(b_values), 8) +
                           std::string(reinterpret_cast<const char*>(&a_value), 8);

  // The given order, compact JSON, no "__metadata__" without metadata, spaces to a multiple of 8.
  std::string header = "{" + json_b + "," + json_a + "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(serialize_safetensors(t), le64(header.size()) + header + data);

  std::string with_meta = "{" + json_b + "," + json_a + R"(,"__metadata__":{"k":"v"}})";
  with_meta.append((8 - with_meta.size() % 8) % 8, ' ');
  EXPECT_EQ(serialize_safetensors(t, {{"k", "v"}}), le64(with_meta.size()) + with_meta + data);
}

TEST(SafeTensors, ReturnsTensorsInTheOrderOfTheirOffsets) {
  // Listed z, b, e, a, d; stored a, e (0 bytes), d (0 bytes), b, z.
  const std::string header = R"({"z":{"dtype":"F64","shape":[],"data_offsets":[16,24]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                             R"("a":{"dtype":"I64","shape":[1,1],"data_offsets":[0,8]},)"
                             R"("d":{"dtype":"I64","shape":[0,5],"data_offsets":[8,8]}})";
  const int64_t a = -3;
  const float b[] = {0.5f, -1.5f};
  const double z = 2.25;
  const std::string data = std::string(reinterpret_cast<const char*>(&a), 8) +
                           std::string(reinterpret_cast<const char*>(b), 8) +
                           std::string(reinterpret_cast<const char*>(&z), 8);
  const SafeTensors st = parse_safetensors(st_file(header, data), "order.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, t] : st.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "e", "d", "b", "z"}));
  ASSERT_EQ(st.tensors.size(), 5u);
  EXPECT_EQ(std::as_const(st.tensors[0].second).data<int64_t>()[0], -3);
  EXPECT_EQ(st.tensors[3].second.to_vector(), (std::vector<double>{0.5, -1.5}));
  EXPECT_EQ(st.tensors[4].second.item(), 2.25);
  EXPECT_EQ(st.tensors[2].second.shape(), Shape({0, 5}));
}

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
       "tensor 'a' has unsupported dtype \"BF16\" (only F32, F64 and I64"},
      {"I32", one("\"I32\"", "[2]", "[0,8]"), "unsupported dtype \"I32\""},
      {"lower case", one("\"f32\"", "[2]", "[0,8]"), "unsupported dtype \"f32\""},
      {"dtype a number", one("4", "[2]", "[0,8]"), "unsupported dtype 4"},
      // shapes
      {"negative dim", one("\"F32\"", "[-2]", "[0,8]"), "shape [-2] with a negative dimension -2"},
      {"float dim", one("\"F32\"", "[2.0]", "[0,8]"), "with a non-integer dimension 2.0"},
      {"string dim", one("\"F32\"", "[\"2\"]", "[0,8]"), "with a non-integer dimension \"2\""},
      {"shape an int", one("\"F32\"", "2", "[0,8]"), "tensor 'a' has shape 2, not a list"},
      {"rank 5", one("\"F32\"", "[1,1,2,1,1]", "[0,8]"), "of rank 5; at most 4 is supported"},
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

TEST(SafeTensors, ReadErrorsNameThePath) {
  TempDir dir;
  const std::string missing = dir.file("missing.safetensors");
  EXPECT_THROW(
      {
        try {
          read_safetensors(missing);
        } catch (const IoError& e) {
          EXPECT_EQ(std::string(e.what()), missing + ": cannot open: No such file or directory");
          throw;
        }
      },
      IoError);
  const std::string bad = dir.file("bad.safetensors");
  spit(bad, st_file("[]"));
  try {
    read_safetensors(bad);
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": the header is [], not a JSON object");
  }
}

TEST(SafeTensors, RejectsBadNamesAndLeavesTheFileAsItWas) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, {{"w", ones({2, 2})}}, {{"k", "v"}});
  const std::string before = slurp(path);

  struct Row {
    const char* label;
    NamedTensors tensors;
    Metadata metadata;
    const char* fragment;
  };
  const std::vector<Row> rows = {
      {"empty name", {{"a", ones({1})}, {"", ones({1})}}, {}, "a tensor has an empty name"},
      {"duplicate",
       {{"a", ones({1})}, {"b", ones({2})}, {"a", ones({1})}},
       {},
       "duplicate tensor name 'a'"},
      {"reserved", {{"__metadata__", ones({1})}}, {}, "'__metadata__' is reserved"},
      {"undefined", {{"a", ones({1})}, {"u", Tensor()}}, {}, "tensor 'u' is undefined"},
      {"name not UTF-8", {{"\xff", ones({1})}}, {}, "not valid UTF-8"},
      {"metadata not UTF-8", {{"a", ones({1})}}, {{"k", "\xc3"}}, "not valid UTF-8"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    try {
      write_safetensors(path, row.tensors, row.metadata);
      ADD_FAILURE() << "no ValueError";
    } catch (const ValueError& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.starts_with(path + ": ")) << m;
      EXPECT_NE(m.find(row.fragment), std::string::npos) << m;
    }
    EXPECT_EQ(slurp(path), before);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
  }
}

TEST(SafeTensors, FailedWriteLeavesNoFileBehind) {
  TempDir dir;
  // A directory in the way: the rename fails after the data was written to the temporary file.
  fs::create_directories(dir.path() / "model.safetensors" / "inside");
  EXPECT_THROW(write_safetensors(dir.file("model.safetensors"), {{"a", ones({3})}}), IoError);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(fs::is_directory(dir.path() / "model.safetensors" / "inside"));
  // A folder that does not exist: the temporary file cannot even be made.
  EXPECT_THROW(write_safetensors(dir.file("no/such/dir.safetensors"), {{"a", ones({3})}}), IoError);
}

TEST(SafeTensors, OverwritesAnExistingFile) {
  TempDir dir;
  const std::string path = dir.file("o.safetensors");
  write_safetensors(path, sample_tensors(), kMetadata);
  const NamedTensors small = {{"x", full({2}, 3.0, Dtype::f32)}};
  write_safetensors(path, small);
  const SafeTensors back = read_safetensors(path);
  expect_same(small, back.tensors);
  EXPECT_TRUE(back.metadata.empty());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"o.safetensors"});
}

}  // namespace
}  // namespace tg
