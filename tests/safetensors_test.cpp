// .safetensors reading and writing: round trips of every dtype and rank, the reference layout,
// names that cannot be written, atomic writes. Malformed files are in
// safetensors_reject_test.cpp, interchange with Python in safetensors_python_test.cpp.

#include <tapegrad/io/safetensors.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "safetensors_util.h"
#include "test_util.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::expect_same;
using test::kMetadata;
using test::le64;
using test::Metadata;
using test::slurp;
using test::spit;
using test::st_file;
using test::TempDir;

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
      {"rank5.f32", randn({2, 1, 3, 1, 2}, rng, Dtype::f32)},
      {"rank6.f64", randn({1, 2, 1, 3, 2, 2}, rng)},
      {"rank6.i64", from_indices({6, 5, 4, 3, 2, 1}, {1, 2, 1, 3, 1, 1})},
      {"empty.f64", zeros({0}, Dtype::f64)},
  };
  return out;
}

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
