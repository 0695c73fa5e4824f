// Interchange with Python (tests/safetensors_reference.py): Python parses the files tapegrad
// writes by hand (json + numpy.frombuffer, as the format's specification reads) and checks every
// value it is told; tapegrad reads a file of torch tensors' bytes. Without python3, numpy or torch
// the tests fail when CI is set and are skipped otherwise.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <tapegrad/io/safetensors.h>
#include "safetensors_util.h"
#include "test_util.h"

namespace tg {
namespace {

using test::expect_same;
using test::kMetadata;
using test::Metadata;
using test::slurp;
using test::spit;
using test::TempDir;

// Runs tests/safetensors_reference.py with `args`; false (and its output in *log) on failure.
bool run_reference(const TempDir& dir, const std::string& args, std::string* log) {
  const std::string cmd = test::kPython + " '" + TAPEGRAD_SAFETENSORS_REFERENCE_PY +
                          "' " + args + " >'" + dir.file("python.log") + "' 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  *log = slurp(dir.file("python.log"));
  return ok;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\u%04x", c);
      out += hex;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// Appends `item` to a comma-separated list.
void add_item(std::string& list, const std::string& item) {
  if (!list.empty()) list += ',';
  list += item;
}

// What the script is told to find: names in order, metadata, every value exactly.
std::string expectations(const NamedTensors& tensors, const Metadata& metadata) {
  std::string names, meta, entries;
  for (const auto& [key, value] : metadata)
    add_item(meta, json_string(key) + ":" + json_string(value));
  for (const auto& [name, t] : tensors) {
    add_item(names, json_string(name));
    std::string shape, values;
    for (const int64_t d : t.shape().vec()) add_item(shape, std::to_string(d));
    const std::vector<double> as_double = t.to_vector();
    for (int64_t i = 0; i < t.numel(); ++i) {
      std::string v;
      if (t.dtype() == Dtype::i64) {
        v = std::to_string(t.data<int64_t>()[i]);
      } else {
        char hex[40];
        std::snprintf(hex, sizeof hex, "%a", as_double[i]);
        v = json_string(hex);
      }
      add_item(values, v);
    }
    const char* code = t.dtype() == Dtype::f32 ? "F32" : t.dtype() == Dtype::f64 ? "F64" : "I64";
    add_item(entries, json_string(name) + R"(:{"dtype":")" + code + R"(","shape":[)" + shape +
                          R"(],"values":[)" + values + "]}");
  }
  return "{\"names\":[" + names + "],\"metadata\":{" + meta + "},\"tensors\":{" + entries + "}}";
}

TEST(SafeTensorsPython, PythonReadsFilesWeWrote) {
  TG_REQUIRE_PYTHON("numpy");
  TempDir dir;
  Rng rng(3);
  const double inf = std::numeric_limits<double>::infinity();
  const NamedTensors tensors = {
      {"transformer.wte.weight", randn({5, 4}, rng, Dtype::f32)},
      {"transformer.h.0.ln_1.bias", randn({4}, rng)},
      {"step", from_indices({1234}, {})},
      {"data", from_indices({-1, 0, 1LL << 40, INT64_MIN}, {2, 2})},
      {"special", from_vector({inf, -inf, -0.0, 1e-310}, {1, 2, 2, 1})},
      {"empty", zeros({0, 3}, Dtype::f32)},
      {"r3", randn({2, 1, 3}, rng, Dtype::f32)},
  };
  write_safetensors(dir.file("model.safetensors"), tensors, kMetadata);
  spit(dir.file("expected.json"), expectations(tensors, kMetadata));
  std::string log;
  EXPECT_TRUE(run_reference(
      dir, "check '" + dir.file("model.safetensors") + "' '" + dir.file("expected.json") + "'",
      &log))
      << log;

  // A negative control: the script does notice a wrong value.
  NamedTensors wrong = tensors;
  wrong[1].second = wrong[1].second.clone();
  wrong[1].second.data<double>()[2] += 1e-12;
  spit(dir.file("wrong.json"), expectations(wrong, kMetadata));
  EXPECT_FALSE(run_reference(
      dir, "check '" + dir.file("model.safetensors") + "' '" + dir.file("wrong.json") + "'", &log));
  EXPECT_NE(log.find("transformer.h.0.ln_1.bias holds"), std::string::npos) << log;
}

TEST(SafeTensorsPython, ReadsTorchTensors) {
  TG_REQUIRE_PYTHON("numpy, torch");
  TempDir dir;
  std::string log;
  ASSERT_TRUE(run_reference(dir, "write '" + dir.file("torch.safetensors") + "'", &log)) << log;
  const SafeTensors st = read_safetensors(dir.file("torch.safetensors"));

  std::vector<double> w, t;
  for (int i = 0; i < 24; ++i) w.push_back(i / 8.0 - 1);
  for (int row = 0; row < 3; ++row)  // t = (arange(6).reshape(2, 3) * -1.5).T
    for (int col = 0; col < 2; ++col) t.push_back((col * 3 + row) * -1.5);
  const NamedTensors expected = {
      {"w", from_vector(w, {2, 3, 4}, Dtype::f32)},
      {"t", from_vector(t, {3, 2})},
      {"idx", from_indices({3, -1, 1LL << 40, -(1LL << 62)}, {2, 2})},
      {"s", scalar(2.5)},
      {"e", zeros({0, 3}, Dtype::f32)},
      {"r4", from_indices({0, 1, 2, 3, 4, 5}, {1, 2, 1, 3})},
      {"z", zeros({2, 0})},
  };
  expect_same(expected, st.tensors);  // the order of the data, not the header's sorted keys
  EXPECT_EQ(st.metadata, (Metadata{{"format", "pt"}, {"tapegrad.config", R"({"n_layer": 2})"}}));
}

}  // namespace
}  // namespace tg
