// Image data (data/idx.h): IDX files, raw and gzip-compressed, read strictly; a folder's four
// files checked against each other and normalised with the training pixels' statistics;
// seeded epoch orders and batches. Files are written here byte by byte (and compressed with
// zlib), so every malformed case is exact; Fashion-MNIST itself is read when Debian's
// dataset-fashion-mnist is installed.

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <tapegrad/data/idx.h>
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using tg::Tensor;
using tg::data::IdxArray;
using Bytes = std::string;

// An IDX file's bytes: the magic (0, 0, type, ndims), big-endian dims, then the values.
Bytes idx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values,
          uint8_t type = 0x08) {
  Bytes b = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) b.push_back(static_cast<char>((d >> shift) & 0xff));
  b.append(values.begin(), values.end());
  return b;
}

Bytes gzip(const Bytes& raw) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write(const fs::path& p, const Bytes& b) { tg::test::spit(p, b); }

std::vector<uint8_t> pixels(int64_t n, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + seed * 11) % 256);
  return v;
}

// A folder of N training and M test images of 3 x 4 with labels 0..9; the training images
// compressed, the test images raw (a folder may mix them).
struct Folder {
  tg::test::TempDir dir;
  std::vector<uint8_t> train_px = pixels(5 * 12, 1), test_px = pixels(2 * 12, 2);
  std::vector<uint8_t> train_y = {3, 0, 9, 1, 3}, test_y = {7, 2};
  Folder() { write_all(); }
  void write_all() {
    write(path("train-images-idx3-ubyte.gz"), gzip(idx({5, 3, 4}, train_px)));
    write(path("train-labels-idx1-ubyte.gz"), gzip(idx({5}, train_y)));
    write(path("t10k-images-idx3-ubyte"), idx({2, 3, 4}, test_px));
    write(path("t10k-labels-idx1-ubyte"), idx({2}, test_y));
  }
  fs::path path(const std::string& name) const { return dir.path() / name; }
};

TEST(Idx, ReadsRawAndGzipAlike) {
  const std::vector<uint8_t> v = pixels(24, 3);
  const Bytes raw = idx({2, 3, 4}, v);
  for (const Bytes& b : {raw, gzip(raw)}) {
    const IdxArray a = tg::data::read_idx_bytes(b, "x");
    EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(a.values, v);
  }
}

TEST(Idx, AFolderIsReadAndNormalisedWithTheTrainingPixels) {
  Folder f;
  for (tg::Dtype dt : {tg::Dtype::f64, tg::Dtype::f32}) {
    const tg::data::ImageFolder d = tg::data::read_image_folder(f.dir.path().string(), dt);
    ASSERT_EQ(d.train.images.shape(), tg::Shape({5, 1, 3, 4}));
    ASSERT_EQ(d.test.images.shape(), tg::Shape({2, 1, 3, 4}));
    EXPECT_EQ(d.train.images.dtype(), dt);
    EXPECT_EQ(d.train.labels.to_vector(), (std::vector<double>{3, 0, 9, 1, 3}));
    EXPECT_EQ(d.test.labels.to_vector(), (std::vector<double>{7, 2}));
    // The statistics, by a two-pass sum here.
    double mean = 0, var = 0;
    for (uint8_t p : f.train_px) mean += p / 255.0 / f.train_px.size();
    for (uint8_t p : f.train_px) var += (p / 255.0 - mean) * (p / 255.0 - mean) / f.train_px.size();
    EXPECT_NEAR(d.mean, mean, 1e-15);
    EXPECT_NEAR(d.std, std::sqrt(var), 1e-15);
    const double tol = dt == tg::Dtype::f64 ? 1e-14 : 1e-6;
    const std::vector<double> x = d.train.images.to_vector(), t = d.test.images.to_vector();
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(x[i], (f.train_px[i] / 255.0 - mean) / std::sqrt(var), tol) << i;
    for (std::size_t i = 0; i < t.size(); ++i)  // the test set uses the training statistics
      ASSERT_NEAR(t[i], (f.test_px[i] / 255.0 - mean) / std::sqrt(var), tol) << i;
    EXPECT_NEAR(std::accumulate(x.begin(), x.end(), 0.0) / x.size(), 0.0, 10 * tol);
  }
}

// Each malformed file: an IoError naming the file, saying what is wrong.
TEST(Idx, MalformedFilesAreRefusedNamingTheFile) {
  const Bytes good = idx({2, 3}, pixels(6, 4));
  Bytes corrupt = gzip(good);
  corrupt[corrupt.size() / 2] ^= 0x55;
  corrupt[corrupt.size() / 2 + 1] ^= 0x2a;
  struct Case {
    const char* name;
    Bytes bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"empty", "", "too short"},
      {"png", "\x89PNG\r\n\x1a\n", "not an IDX file"},
      {"int32 elements", idx({2, 3}, pixels(24, 4), 0x0c), "element type 12"},
      {"zero dims", idx({}, {}), "0 dims"},
      {"five dims", idx({1, 1, 1, 1, 1}, {7}), "5 dims"},
      {"zero dim", idx({2, 0}, {}), "dim 1 is 0"},
      {"truncated header", idx({2, 3}, {}).substr(0, 9), "truncated header"},
      {"truncated data", idx({2, 3}, pixels(5, 4)), "truncated"},
      {"huge dims", idx({65536, 65536, 65536, 65536}, pixels(5, 4)), "truncated"},
      {"data past the dims", idx({2, 3}, pixels(7, 4)), "1 bytes past the data"},
      {"corrupt gzip", corrupt, "gzip stream is corrupt"},
      {"truncated gzip", gzip(good).substr(0, gzip(good).size() - 12), "truncated"},
      {"bytes after the gzip stream", gzip(good) + "xyz", "3 bytes after the end of the gzip"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    tg::test::expect_throws<tg::IoError>([&] { tg::data::read_idx_bytes(c.bytes, "bad.idx"); },
                                         {"bad.idx: ", c.says});
  }
}

// Files that are well formed alone but do not fit together.
TEST(Idx, AFolderWhoseFilesDoNotFitIsRefused) {
  struct Case {
    const char* name;
    std::function<void(Folder&)> spoil;
    std::string file, says;
  };
  const std::vector<Case> cases = {
      {"missing", [](Folder& f) { fs::remove(f.path("t10k-labels-idx1-ubyte")); },
       "t10k-labels-idx1-ubyte.gz", "no such file"},
      {"both forms", [](Folder& f) { write(f.path("t10k-labels-idx1-ubyte.gz"), gzip(idx({2}, f.test_y))); },
       "t10k-labels-idx1-ubyte", "keep one"},
      {"label count", [](Folder& f) { write(f.path("t10k-labels-idx1-ubyte"), idx({3}, {1, 2, 3})); },
       "t10k-labels-idx1-ubyte", "3 labels for 2 images"},
      {"label outside the classes", [](Folder& f) { write(f.path("t10k-labels-idx1-ubyte"), idx({2}, {1, 10})); },
       "t10k-labels-idx1-ubyte", "label 10 at index 1 is outside the 10 classes"},
      {"images of rank 2", [](Folder& f) { write(f.path("t10k-images-idx3-ubyte"), idx({2, 12}, f.test_px)); },
       "t10k-images-idx3-ubyte", "must be (N, H, W), got (2, 12)"},
      {"labels of rank 2", [](Folder& f) { write(f.path("t10k-labels-idx1-ubyte"), idx({2, 1}, f.test_y)); },
       "t10k-labels-idx1-ubyte", "must be (N,), got (2, 1)"},
      {"test images of another size", [](Folder& f) { write(f.path("t10k-images-idx3-ubyte"), idx({2, 4, 3}, f.test_px)); },
       "t10k-images-idx3-ubyte", "images of 4 x 3, the training images are 3 x 4"},
      {"constant pixels", [](Folder& f) { write(f.path("train-images-idx3-ubyte.gz"), gzip(idx({5, 3, 4}, std::vector<uint8_t>(60, 9)))); },
       "train-images-idx3-ubyte.gz", "every training pixel has the same value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Folder f;
    c.spoil(f);
    tg::test::expect_throws<tg::IoError>(
        [&] { tg::data::read_image_folder(f.dir.path().string(), tg::Dtype::f32); },
        {(f.dir.path() / c.file).string() + ": ", c.says});
  }
  Folder f;
  tg::test::expect_throws<tg::ValueError>(
      [&] { tg::data::read_image_folder(f.dir.path().string(), tg::Dtype::i64); }, {"int64"});
}

TEST(Idx, EpochOrdersAreSeededPermutations) {
  tg::Rng a(3), b(3);
  const std::vector<int64_t> first = tg::data::epoch_order(1000, a);
  EXPECT_EQ(first, tg::data::epoch_order(1000, b));  // the same seed, the same order
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);  // a permutation
  EXPECT_NE(first, iota);
  EXPECT_NE(tg::data::epoch_order(1000, a), first);  // the next epoch draws another
  EXPECT_EQ(tg::data::epoch_order(1000, a, /*shuffle=*/false), iota);
  EXPECT_TRUE(tg::data::epoch_order(0, a).empty());
}

TEST(Idx, BatchesTakeTheRowsTheOrderNames) {
  Folder f;
  const tg::data::ImageFolder d = tg::data::read_image_folder(f.dir.path().string(), tg::Dtype::f64);
  const std::vector<int64_t> order = {4, 1, 3, 0, 2};
  const tg::data::Batch b = tg::data::image_batch(d.train, order, 1, 3);  // rows 1, 3, 0
  ASSERT_EQ(b.x.shape(), tg::Shape({3, 1, 3, 4}));
  EXPECT_EQ(b.y.to_vector(), (std::vector<double>{0, 1, 3}));
  const std::vector<double> all = d.train.images.to_vector(), x = b.x.to_vector();
  for (int i = 0; i < 3; ++i)
    for (int p = 0; p < 12; ++p) ASSERT_EQ(x[i * 12 + p], all[order[1 + i] * 12 + p]);
  tg::test::expect_throws<tg::ValueError>([&] { tg::data::image_batch(d.train, order, 3, 3); },
                                          {"image_batch", "[3, 3 + 3)", "order of 5"});
  tg::test::expect_throws<tg::ValueError>([&] { tg::data::image_batch(d.train, {0, 7}, 0, 2); },
                                          {"image_batch", "7", "5 examples"});
}

// Debian's dataset-fashion-mnist: 60,000 + 10,000 images of 28 x 28, 10 classes.
TEST(Idx, FashionMnistFromDebian) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) {
    if (std::getenv("CI")) FAIL() << dir << " is missing; CI installs dataset-fashion-mnist";
    GTEST_SKIP() << dir << " not installed (apt-get install dataset-fashion-mnist)";
  }
  const tg::data::ImageFolder d = tg::data::read_image_folder(dir, tg::Dtype::f32);
  EXPECT_EQ(d.train.images.shape(), tg::Shape({60000, 1, 28, 28}));
  EXPECT_EQ(d.test.images.shape(), tg::Shape({10000, 1, 28, 28}));
  // The published statistics of Fashion-MNIST's training pixels.
  EXPECT_NEAR(d.mean, 0.2860, 5e-5);
  EXPECT_NEAR(d.std, 0.3530, 5e-5);
  std::vector<int64_t> per_class(10);
  for (double y : d.train.labels.to_vector()) ++per_class[static_cast<int>(y)];
  for (int64_t n : per_class) EXPECT_EQ(n, 6000);  // balanced classes
}

}  // namespace
