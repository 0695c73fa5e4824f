// `tapegrad train --images` (run in-process) on small IDX folders written here: images whose
// class shows as a bright band (so training has something to learn), uncompressed. A run by
// epochs fills metrics.csv's epoch columns on each epoch's last update and draws the test
// accuracy in loss.svg; a run stopped after an epoch and resumed ends bit for bit where the
// run never stopped ends; the model.safetensors of a run loads into pytorch/examples' Net (and
// the MLP) with load_state_dict and scores the test images as the run's last test_accuracy says;
// a --no-shuffle --dropout 0 --dtype f64 run on the first 1,024 images of Debian's Fashion-MNIST
// has every update's loss equal to a PyTorch replay of the same recipe from the same --init
// weights (tests/image_train_reference.py), and the same run with Net's dropouts on does not
// (the negative control). python3 with numpy and torch
// is required (its absence fails the suite).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/data/idx.h>
#include <tapegrad/data/uniform.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/image_classifiers.h>
#include "csv_util.h"
#include "test_util.h"
#include "tools/train_cmd.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

using test::cells;
using test::lines;

// An uncompressed IDX file of unsigned bytes.
void write_idx(const fs::path& path, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& v) {
  std::string bytes = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) bytes += static_cast<char>(d >> shift & 0xFF);
  bytes.append(v.begin(), v.end());
  test::spit(path, bytes);
}

// n images of 28 x 28 with labels 0..9: noise, and rows 2k + 4, 2k + 5 bright for class k.
void write_set(const fs::path& dir, const std::string& prefix, uint32_t n, Rng& rng) {
  std::vector<uint8_t> pixels(n * 784), labels(n);
  for (uint32_t i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(data::uniform_below(rng, 10));
    for (int p = 0; p < 784; ++p) {
      const int row = p / 28;
      const bool band = row / 2 == labels[i] + 2;
      pixels[i * 784 + p] = static_cast<uint8_t>(data::uniform_below(rng, 120) + (band ? 130 : 0));
    }
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {n, 28, 28}, pixels);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {n}, labels);
}

fs::path image_folder(const TempDir& tmp, uint32_t train, uint32_t test) {
  const fs::path dir = tmp / "images";
  fs::create_directories(dir);
  Rng rng(train * 31 + test);
  write_set(dir, "train", train, rng);
  write_set(dir, "t10k", test, rng);
  return dir;
}

// The first `train` and `test` images of Debian's Fashion-MNIST, uncompressed.
fs::path fashion_subset(const TempDir& tmp, uint32_t train, uint32_t test) {
  const fs::path dir = tmp / "fashion";
  fs::create_directories(dir);
  const std::string from = "/usr/share/datasets/fashion-mnist/";
  for (const auto& [prefix, n] : {std::pair<std::string, uint32_t>{"train", train}, {"t10k", test}})
    for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
      const data::IdxArray a = data::read_idx(from + prefix + kind + ".gz");
      std::vector<uint32_t> dims(a.dims.begin(), a.dims.end());
      const std::size_t per = a.values.size() / dims[0];
      dims[0] = n;
      write_idx(dir / (prefix + kind), dims, {a.values.begin(), a.values.begin() + n * per});
    }
  return dir;
}

TrainArgs image_args(const fs::path& images, const fs::path& out, const std::string& arch,
                     int64_t epochs) {
  TrainArgs a;
  a.images = images.string();
  a.out = out.string();
  a.arch = arch;
  a.epochs = epochs;
  a.threads = 1;
  a.handle_sigint = false;
  a.given = {"arch", "epochs"};
  return a;
}

int run(const TrainArgs& a) {
  std::ostringstream err;
  const int status = run_train(a, err);
  EXPECT_EQ(status, 0) << err.str();
  return status;
}

// metrics.csv without the timing columns (tokens_per_s, elapsed_s), which differ by run.
std::string without_timing(const fs::path& dir) {
  std::string out;
  for (const std::string& l : lines(test::slurp(dir / "metrics.csv"))) {
    std::vector<std::string> c = cells(l);
    c.erase(c.begin() + 6, c.begin() + 8);
    for (const std::string& x : c) out += x + ",";
    out += "\n";
  }
  return out;
}

std::string python(const std::string& args, const TempDir& tmp) {
  const std::string log = tmp.file("python.log");
  const std::string cmd = test::kPython + " " + TAPEGRAD_IMAGE_TRAIN_REFERENCE_PY + " " + args +
                          " > " + log + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << test::slurp(log);
  return test::slurp(log);
}

TEST(TrainImages, EpochColumnsFilledOnEachEpochsLastUpdate) {
  const TempDir tmp;
  const fs::path images = image_folder(tmp, 200, 50);
  TrainArgs a = image_args(images, tmp / "run", "mlp", 2);
  a.train_limit = 150;  // batches of 64, 64, 22
  a.given.insert("train-limit");
  std::ostringstream err;
  ASSERT_EQ(run_train(a, err), 0) << err.str();
  // the progress line counts images, not tokens
  EXPECT_NE(err.str().find(" img/s  ETA "), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("tok/s"), std::string::npos) << err.str();
  const std::vector<std::string> rows = lines(test::slurp(tmp / "run/metrics.csv"));
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0], "step,lr,loss,grad_norm,val_loss,accuracy,tokens_per_s,elapsed_s,epoch,"
                     "test_loss,test_accuracy");
  for (size_t r = 1; r < rows.size(); ++r) {
    SCOPED_TRACE(rows[r]);
    const std::vector<std::string> c = cells(rows[r]);
    ASSERT_EQ(c.size(), 11u);
    EXPECT_EQ(std::stod(c[1]), 1e-3);  // a constant rate
    const bool last = r == 3 || r == 6;
    EXPECT_EQ(c[8], last ? std::to_string(r / 3) : "");
    EXPECT_EQ(c[9].empty(), !last);
    if (last) {
      const double accuracy = std::stod(c[10]);
      EXPECT_GE(accuracy, 0);
      EXPECT_LE(accuracy, 1);
      EXPECT_EQ(accuracy * 50, std::round(accuracy * 50));  // a count of the 50 test images
    }
  }
  const std::string svg = test::slurp(tmp / "run/loss.svg");
  EXPECT_NE(svg.find("test accuracy"), std::string::npos);
  EXPECT_NE(svg.find("test loss"), std::string::npos);
}

TEST(TrainImages, ResumedAfterAnEpochEndsBitForBit) {
  const TempDir tmp;
  const fs::path images = image_folder(tmp, 150, 20);
  ASSERT_EQ(run(image_args(images, tmp / "whole", "cnn", 2)), 0);
  ASSERT_EQ(run(image_args(images, tmp / "part", "cnn", 1)), 0);
  TrainArgs more = image_args(images, tmp / "part", "cnn", 2);
  more.resume = (tmp / "part").string();
  more.given = {"epochs"};
  ASSERT_EQ(run(more), 0);
  EXPECT_EQ(test::slurp(tmp / "whole/model.safetensors"), test::slurp(tmp / "part/model.safetensors"));
  EXPECT_EQ(without_timing(tmp / "whole"), without_timing(tmp / "part"));
  EXPECT_EQ(lines(test::slurp(tmp / "part/metrics.csv")).size(), 7u);  // 3 updates an epoch
}

// The cnn (dropout on) over 3 epochs of batches 64, 64, 22: the full batches replay the recorded
// step (from the third update: 4 of the 6), the short last one of each epoch runs eagerly, and
// the run ends with the weights and losses of one that records every update (--no-replay), bit
// for bit.
TEST(TrainImages, ReplayedStepsWithAShortLastBatchTrainTheRecordedOnesWeights) {
  const TempDir tmp;
  const fs::path images = image_folder(tmp, 150, 20);
  std::ostringstream err;
  ASSERT_EQ(run_train(image_args(images, tmp / "replayed", "cnn", 3), err), 0) << err.str();
  EXPECT_NE(err.str().find("9 updates done (4 replayed);"), std::string::npos) << err.str();
  TrainArgs a = image_args(images, tmp / "recorded", "cnn", 3);
  a.no_replay = true;
  ASSERT_EQ(run(a), 0);
  EXPECT_EQ(test::slurp(tmp / "replayed/model.safetensors"),
            test::slurp(tmp / "recorded/model.safetensors"));
  EXPECT_EQ(without_timing(tmp / "replayed"), without_timing(tmp / "recorded"));
  EXPECT_EQ(lines(test::slurp(tmp / "replayed/metrics.csv")).size(), 10u);  // 3 updates an epoch
}

TEST(TrainImages, ModelLoadsIntoTorchWithTheRunsTestAccuracy) {
  ASSERT_EQ(test::python_missing("numpy, torch"), "") << "this test needs PyTorch";
  const TempDir tmp;
  const fs::path images = image_folder(tmp, 256, 100);
  for (const std::string arch : {"cnn", "mlp"}) {
    SCOPED_TRACE(arch);
    const fs::path out = tmp / arch;
    ASSERT_EQ(run(image_args(images, out, arch, 1)), 0);
    const std::vector<std::string> rows = lines(test::slurp(out / "metrics.csv"));
    const double accuracy = std::stod(cells(rows.back())[10]);
    const std::vector<std::string> counts = lines(python(
        "--images " + images.string() + " --model " + (out / "model.safetensors").string() +
            " --arch " + arch,
        tmp));
    ASSERT_FALSE(counts.empty());
    EXPECT_EQ(counts.back(), std::to_string(static_cast<int>(std::lround(accuracy * 100))) + " 100");
    EXPECT_GT(accuracy, 0.2);  // above chance: the bands are learnt
  }
}

// The images the replay trains on: the first 1,024, 16 updates an epoch (under AddressSanitizer,
// whose instrumented convolutions run several times slower, the first 256: 4 updates an epoch).
#if defined(TG_ASAN)
constexpr int kReplayImages = 256;
#else
constexpr int kReplayImages = 1024;
#endif

TEST(TrainImages, StepLossesMatchAPyTorchReplay) {
  ASSERT_EQ(test::python_missing("numpy, torch"), "") << "this test needs PyTorch";
  const TempDir tmp;
  const fs::path images = fashion_subset(tmp, kReplayImages, 64);  // real images: the loss stays O(1)
  Rng init_rng(11);
  const nn::MnistNet net({.dtype = Dtype::f64}, init_rng);
  write_safetensors(tmp.file("init.safetensors"), net.state_dict());
  python("--images " + images.string() + " --init " + tmp.file("init.safetensors") +
             " --epochs 3 --batch 64 --out " + tmp.file("torch_losses.txt"),
         tmp);
  std::vector<double> want;
  for (const std::string& l : lines(test::slurp(tmp / "torch_losses.txt"))) want.push_back(std::strtod(l.c_str(), nullptr));
  ASSERT_EQ(want.size(), std::size_t{3 * kReplayImages / 64});  // 3 epochs of batches of 64
  const auto losses = [&](const std::string& name, bool dropout_off, int64_t epochs) {
    TrainArgs a = image_args(images, tmp / name, "cnn", epochs);
    a.dtype = "f64";
    a.init = tmp.file("init.safetensors");
    a.no_shuffle = true;
    a.given.insert({"dtype", "no-shuffle"});
    if (dropout_off) {
      a.dropout = 0;
      a.given.insert("dropout");
    }
    run(a);
    std::vector<double> got;
    const std::vector<std::string> rows = lines(test::slurp(tmp / name / "metrics.csv"));
    for (size_t r = 1; r < rows.size(); ++r) got.push_back(std::stod(cells(rows[r])[2]));
    return got;
  };
  const std::vector<double> got = losses("replay", true, 3);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t s = 0; s < got.size(); ++s) worst = std::max(worst, std::abs(got[s] - want[s]) / std::abs(want[s]));
  EXPECT_LE(worst, 1e-10);
  if (kReplayImages == 1024) {
    EXPECT_LT(want.back(), 0.8 * want.front());  // the replay trains
  }
  // The negative control: Net's own dropouts, one epoch.
  const std::vector<double> dropped = losses("dropout", false, 1);
  double apart = 0;
  for (size_t s = 0; s < dropped.size(); ++s) apart = std::max(apart, std::abs(dropped[s] - want[s]) / std::abs(want[s]));
  EXPECT_GT(apart, 1e-6);
}

}  // namespace
}  // namespace tg
