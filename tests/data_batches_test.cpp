// data/: fixed batches from .npy files of token ids (int64 or int32): step s reads batch s mod N,
// and bad files are rejected with the path and the problem.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/data/batches.h>
#include "data_util.h"
#include <tapegrad/io/npy.h>
#include "npy_util.h"
#include "test_util.h"

namespace tg::data {
namespace {

using test::dict;
using test::expect_rows;
using test::npy;
using test::raw_bytes;
using test::spit;
using test::TempDir;
using test::throws;
using test::values;

// (N, B, T + 1) = (3, 2, 5) with token = 100 n + 10 b + t: every window tells where it came from.
std::vector<int64_t> labelled_tokens() {
  std::vector<int64_t> v;
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 5; ++t) v.push_back(100 * n + 10 * b + t);
  return v;
}

TEST(FixedBatches, StepUsesBatchStepModNFromInt64AndInt32Files) {
  TempDir dir;
  const std::vector<int64_t> tokens = labelled_tokens();
  write_npy(dir.file("i8.npy"), from_indices(tokens, {3, 2, 5}));
  const std::vector<int32_t> narrow(tokens.begin(), tokens.end());
  spit(dir.file("i4.npy"), npy(dict("'<i4'", "(3, 2, 5)"), raw_bytes(narrow)));
  for (const char* name : {"i8.npy", "i4.npy"}) {
    SCOPED_TRACE(name);
    const FixedBatches batches(dir.file(name), 300);
    EXPECT_EQ(batches.num_batches(), 3);
    EXPECT_EQ(batches.batch_size(), 2);
    EXPECT_EQ(batches.block_size(), 4);
    for (int64_t step : {0, 1, 2, 3, 4, 7, 3000}) {
      SCOPED_TRACE(step);
      const Batch batch = batches.batch(step);
      ASSERT_EQ(batch.x.shape(), Shape({2, 4}));
      ASSERT_EQ(batch.y.shape(), Shape({2, 4}));
      std::vector<int64_t> x, y;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 4; ++t) {
          x.push_back(100 * (step % 3) + 10 * b + t);
          y.push_back(100 * (step % 3) + 10 * b + t + 1);
        }
      EXPECT_EQ(values(batch.x), x);
      EXPECT_EQ(values(batch.y), y);
    }
  }
}

TEST(FixedBatches, RejectsBadFiles) {
  TempDir dir;
  Rng rng(5);
  const auto put = [&](const std::string& name, const Tensor& t) {
    write_npy(dir.file(name), t);
    return dir.file(name);
  };
  const std::string f64 = put("f64.npy", randn({3, 2, 5}, rng));
  const std::string f32 = put("f32.npy", randn({3, 2, 5}, rng, Dtype::f32));
  const std::string rank2 = put("rank2.npy", from_indices({1, 2, 3, 4}, {2, 2}));
  const std::string short_windows = put("t1.npy", from_indices({1, 2}, {1, 2, 1}));
  const std::string no_batches = put("n0.npy", from_indices({}, {0, 2, 5}));
  std::vector<int64_t> tokens = labelled_tokens();
  const std::string good = put("good.npy", from_indices(tokens, {3, 2, 5}));
  tokens[1 * 10 + 0 * 5 + 2] = -1;  // [1, 0, 2]
  const std::string negative = put("negative.npy", from_indices(tokens, {3, 2, 5}));
  const std::string i2 = dir.file("i2.npy");
  spit(i2, npy(dict("'<i2'", "(1, 1, 2)"), std::string(4, '\0')));
  const std::string missing = dir.file("missing.npy");

  const auto open = [](const std::string& path, int64_t vocab) {
    return [path, vocab] { FixedBatches batches(path, vocab); };
  };
  expect_rows({
      {"float64", throws<IoError>(open(f64, 0)),
       f64 + ": dtype float64; fixed batches hold token ids, int64 ('<i8') or int32 ('<i4')"},
      {"float32", throws<IoError>(open(f32, 0)), f32 + ": dtype float32"},
      {"int16", throws<IoError>(open(i2, 0)), i2 + ": unsupported dtype '<i2'"},
      {"missing", throws<IoError>(open(missing, 0)), missing + ": cannot open"},
      {"rank 2", throws<IoError>(open(rank2, 0)),
       rank2 + ": shape (2, 2) has rank 2; fixed batches have shape (N, B, T + 1)"},
      {"T + 1 = 1", throws<ValueError>(open(short_windows, 0)),
       short_windows + ": shape (1, 2, 1) has windows of 1 tokens; T + 1 must be at least 2"},
      {"no batches", throws<ValueError>(open(no_batches, 0)), no_batches + ": shape (0, 2, 5)"},
      {"token past vocab", throws<ValueError>(open(good, 214)),
       good + ": token 214 at (2, 1, 4) is outside the vocabulary [0, 214)"},
      {"negative token", throws<ValueError>(open(negative, 0)),
       negative + ": token -1 at (1, 0, 2) is negative"},
      {"negative vocab", throws<ValueError>(open(good, -3)), "vocab_size -3 is negative"},
      {"negative step", throws<ValueError>([&] { FixedBatches(good, 0).batch(-1); }),
       "step -1 is negative"},
  });
  EXPECT_NO_THROW(FixedBatches(good, 215));
  EXPECT_NO_THROW(FixedBatches{good});
}

}  // namespace
}  // namespace tg::data
