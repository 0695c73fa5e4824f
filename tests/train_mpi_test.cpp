// `tapegrad train` on two ranks under mpirun (data-parallel training, tools/train_dist.h), run as a
// user runs it, a subprocess on files in temporary folders:
//   equality:   2 ranks equal 1 rank in float64 to 1e-12 relative (losses, grad norms, val_loss
//               and accuracy of metrics.csv; every weight of model.safetensors) for AdamW with
//               clipping and SGD with momentum, on a text, the induction task and --batches
//   --resume:   a 1-rank run continued on 2 ranks (and the other way) equals the run never stopped
//   errors:     the data file missing on rank 1 only, or rank 1's copy corrupt (each rank reads
//               --text / --batches itself, as on machines without a shared filesystem; mpirun's
//               MPMD form gives each rank its own working folder): exit 1, one line from rank 0
//               naming rank 1 and the file, --out as it was; a batch that does not split: exit 2
//   images:     an image run whose epoch ends in a batch that does not split evenly over the ranks
// A negative control: a run with another clipping threshold is told apart.
// And in-process: slice_loss weighs slices with ignored targets so that the mean of the ranks'
// gradients is the whole batch's (no data source yields ignored targets yet; the math must hold).
// The mpirun cases skip when CMake found no MPI launcher.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include <tapegrad/io/npy.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/gpt_config.h>
#include "tools/arch.h"
#include "tools/train_dist.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::joined;
using test::Outcome;
using test::quote;
using test::repetitive_text;
using test::slurp;
using test::spit;
using test::TempDir;

const std::string kExe = TAPEGRAD_EXE;
const std::string kMpiexec = TAPEGRAD_MPIEXEC;          // "" without MPI
const std::string kMpiexecFlags = TAPEGRAD_MPIEXEC_FLAGS;  // --oversubscribe for Open MPI

// The mpirun prefix for n ranks; -q (Open MPI) keeps its banners out of stderr.
std::string mpirun(int n) {
  const bool open_mpi = kMpiexecFlags.find("--oversubscribe") != std::string::npos;
  return std::string("env ") + TAPEGRAD_MPI_ENV + " " + quote(kMpiexec) + (open_mpi ? " -q " : " ") +
         kMpiexecFlags + " -np " + std::to_string(n);
}

Outcome train(int ranks, const std::vector<std::string>& args) {
  const std::string exe = quote(kExe) + " train" + joined(args);
  return test::run_shell(ranks == 1 ? exe : mpirun(ranks) + " " + exe);
}

#define NEED_MPI() \
  if (kMpiexec.empty()) GTEST_SKIP() << "no MPI launcher"

// Columns of metrics.csv per row: step, lr, loss, grad_norm, val_loss, accuracy (the timing
// columns differ from run to run).
std::vector<std::vector<std::string>> metrics(const std::string& dir) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(slurp(dir + "/metrics.csv"));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> c;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) c.push_back(f);
    c.resize(6);
    rows.push_back(c);
  }
  return rows;
}

double rel(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-300);
}

constexpr double kTol = 1e-12;

// The runs in folders `got` and `want` agree: metrics to `tol` relative per number, each weight
// tensor to `tol` relative to its largest magnitude.
void expect_same_run(const std::string& got, const std::string& want, double tol = kTol) {
  const auto g = metrics(got), w = metrics(want);
  ASSERT_EQ(g.size(), w.size());
  ASSERT_GT(g.size(), 1u);
  for (size_t i = 0; i < g.size(); ++i) {
    SCOPED_TRACE("metrics.csv line " + std::to_string(i + 1));
    for (size_t k = 0; k < 6; ++k) {
      if (i == 0 || k < 2) {  // header, step and lr: the same text
        EXPECT_EQ(g[i][k], w[i][k]);
        continue;
      }
      ASSERT_EQ(g[i][k].empty(), w[i][k].empty()) << "column " << k;
      if (!g[i][k].empty()) {
        EXPECT_LE(rel(std::stod(g[i][k]), std::stod(w[i][k])), tol) << g[i][k] << " vs " << w[i][k];
      }
    }
  }
  const SafeTensors a = read_safetensors(got + "/model.safetensors");
  const SafeTensors b = read_safetensors(want + "/model.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    SCOPED_TRACE(a.tensors[t].first);
    ASSERT_EQ(a.tensors[t].first, b.tensors[t].first);
    const std::vector<double> x = a.tensors[t].second.to_vector(), y = b.tensors[t].second.to_vector();
    ASSERT_EQ(x.size(), y.size());
    double scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, std::abs(y[i]));
      diff = std::max(diff, std::abs(x[i] - y[i]));
    }
    EXPECT_LE(diff, tol * scale);
  }
}

std::vector<std::string> tiny(std::vector<std::string> more) {
  std::vector<std::string> a = {"--layers", "2", "--heads", "2", "--embd", "16", "--block", "16",
                                "--batch", "4", "--steps", "16", "--eval-every", "5",
                                "--eval-batches", "3", "--lr", "3e-3", "--warmup", "3",
                                "--grad-clip", "0.5", "--dtype", "f64", "--threads", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

struct EqualityCase {
  const char* name;
  const char* data;       // text, induction or batches
  const char* optimizer;  // adamw (clipping at 0.5) or sgd (momentum 0.9, clipping at 0.5)
};

void PrintTo(const EqualityCase& c, std::ostream* os) { *os << c.name; }

class TwoRanksEqualOne : public testing::TestWithParam<EqualityCase> {};

TEST_P(TwoRanksEqualOne, MetricsAndWeightsInFloat64) {
  NEED_MPI();
  const EqualityCase& c = GetParam();
  TempDir dir;
  std::vector<std::string> flags;
  if (std::string(c.data) == "text") {
    spit(dir / "text.txt", repetitive_text());
    flags = {"--text", dir / "text.txt"};
  } else if (std::string(c.data) == "induction") {
    flags = {"--task", "induction", "--vocab", "12"};
  } else {  // 3 fixed batches of B = 4 windows of T + 1 = 9 tokens
    std::vector<int64_t> tokens(3 * 4 * 9);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 7 + i / 5) % 10);
    write_npy(dir / "batches.npy", from_indices(tokens, {3, 4, 9}));
    flags = {"--batches", dir / "batches.npy", "--vocab", "10"};
  }
  flags.insert(flags.end(), {"--optimizer", c.optimizer});
  if (std::string(c.optimizer) == "sgd") flags.insert(flags.end(), {"--momentum", "0.9", "--lr", "3e-2"});
  auto with_out = [&](const std::string& out) {
    std::vector<std::string> a = tiny(flags);
    a.insert(a.end(), {"--out", out});
    return a;
  };
  const Outcome one = train(1, with_out(dir / "one"));
  ASSERT_EQ(one.status, 0) << one.err;
  const Outcome two = train(2, with_out(dir / "two"));
  ASSERT_EQ(two.status, 0) << two.err;
  expect_same_run(dir / "two", dir / "one");
  if (std::string(c.data) == "induction") {
    EXPECT_FALSE(metrics(dir / "two")[1][5].empty());  // the accuracy is there, and equal
  }
}

// An image run by epochs whose last batch (149 = 2 x 64 + 21 images) does not split evenly: the
// ranks take 11 and 10 of its rows, weighted so that the step is the one process's. Both image
// models: the MLP, and the CNN (pytorch/examples' Net) with --dropout 0 (each rank draws dropout
// masks of its own, as PyTorch's DDP ranks do, so with Net's dropouts on the runs differ). The
// CNN's weights agree to 1e-10: its fc1 (9216 x 128) sums 9,216 products per entry, split over
// the ranks in another order, and AdamW's m / sqrt(v) turns a gradient's rounding into a step's
// (measured: fc1.weight 1.6e-12 of its largest entry after 6 updates, the rest below 1e-12).
class ImagesTwoRanksEqualOne : public testing::TestWithParam<const char*> {};

TEST_P(ImagesTwoRanksEqualOne, WithAnUnevenLastBatch) {
  NEED_MPI();
  TempDir dir;
  auto args = [&](const std::string& out) {
    std::vector<std::string> a{"--images", "/usr/share/datasets/fashion-mnist",
                               "--arch", GetParam(), "--train-limit", "149", "--epochs", "2",
                               "--dtype", "f64", "--threads", "1", "--out", out};
    if (std::string(GetParam()) == "mlp") a.insert(a.end(), {"--hidden", "16"});
    if (std::string(GetParam()) == "cnn") a.insert(a.end(), {"--dropout", "0"});
    return a;
  };
  const Outcome one = train(1, args(dir / "one"));
  ASSERT_EQ(one.status, 0) << one.err;
  const Outcome two = train(2, args(dir / "two"));
  ASSERT_EQ(two.status, 0) << two.err;
  expect_same_run(dir / "two", dir / "one", std::string(GetParam()) == "cnn" ? 1e-10 : kTol);
}

INSTANTIATE_TEST_SUITE_P(TrainMpi, ImagesTwoRanksEqualOne, testing::Values("mlp", "cnn"),
                         [](const testing::TestParamInfo<const char*>& i) { return i.param; });

INSTANTIATE_TEST_SUITE_P(
    TrainMpi, TwoRanksEqualOne,
    testing::Values(EqualityCase{"text_adamw", "text", "adamw"},
                    EqualityCase{"text_sgd", "text", "sgd"},
                    EqualityCase{"induction_adamw", "induction", "adamw"},
                    EqualityCase{"induction_sgd", "induction", "sgd"},
                    EqualityCase{"batches_adamw", "batches", "adamw"}),
    [](const testing::TestParamInfo<EqualityCase>& info) { return info.param.name; });

// The train state is the same whichever number of ranks wrote it, so a run moves between them.
TEST(TrainMpi, ResumeOnOtherRanksEqualsTheRunNeverStopped) {
  NEED_MPI();
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  // A constant rate, so that a run of 8 updates has the first 8 rates of a run of 16.
  const auto flags = [&](const std::string& out, const char* steps, bool resume) {
    std::vector<std::string> a = tiny({"--text", dir / "text.txt", "--lr-min", "3e-3",
                                       "--warmup", "0", "--steps", steps, "--out", out});
    if (resume) a.insert(a.end(), {"--resume", out});
    return a;
  };
  ASSERT_EQ(train(1, flags(dir / "whole", "16", false)).status, 0);
  for (const int first : {1, 2}) {
    SCOPED_TRACE(std::to_string(first) + " rank(s), then " + std::to_string(3 - first));
    const std::string part = dir / ("part" + std::to_string(first));
    const Outcome a = train(first, flags(part, "8", false));
    ASSERT_EQ(a.status, 0) << a.err;
    const Outcome b = train(3 - first, flags(part, "16", true));
    ASSERT_EQ(b.status, 0) << b.err;
    expect_same_run(part, dir / "whole");
  }
}

// stderr is exactly one line holding each fragment; --out holds only what it held before.
void expect_clean_failure(const Outcome& r, int status, const std::vector<std::string>& fragments,
                          const std::string& out) {
  EXPECT_EQ(r.status, status) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const std::string& f : fragments) EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
  EXPECT_EQ(test::files_in(out), std::set<std::string>{"keep.txt"});
  EXPECT_EQ(slurp(out + "/keep.txt"), "mine");
}

TEST(TrainMpi, BadInputOnRankOneOnlyEndsBothRanksWithOneLine) {
  NEED_MPI();
  TempDir dir;
  // Rank 0 works in folder r0, rank 1 in r1: the same relative path names different files, as
  // on two machines. r1 lacks the text, and its batches file has a token outside the vocabulary.
  fs::create_directories(dir / "r0");
  fs::create_directories(dir / "r1");
  spit(dir / "r0/text.txt", repetitive_text());
  std::vector<int64_t> tokens(2 * 4 * 9, 3);
  write_npy(dir / "r0/batches.npy", from_indices(tokens, {2, 4, 9}));
  tokens[17] = 11;
  write_npy(dir / "r1/batches.npy", from_indices(tokens, {2, 4, 9}));
  fs::create_directories(dir / "out");
  spit(dir / "out/keep.txt", "mine");

  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--text", "text.txt"}, {"tapegrad: rank 1: text.txt: cannot open"}},
      {{"--batches", "batches.npy", "--vocab", "10"}, {"tapegrad: rank 1: batches.npy", "11"}},
  };
  for (const auto& [data, fragments] : cases) {
    SCOPED_TRACE(data[0]);
    std::vector<std::string> args = tiny(data);
    args.insert(args.end(), {"--out", dir / "out"});
    const std::string exe = quote(kExe) + " train" + joined(args);
    // MPMD: one rank per working folder (Open MPI's -wdir; MPICH's is -wdir too).
    const std::string cmd = mpirun(1) + " -wdir " + quote(dir / "r0") + " " + exe + " : -np 1 -wdir " +
                            quote(dir / "r1") + " " + exe;
    expect_clean_failure(test::run_shell(cmd), 1, fragments, dir / "out");
  }
}

TEST(TrainMpi, BatchThatDoesNotSplitOverTheRanksExits2) {
  NEED_MPI();
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  fs::create_directories(dir / "out");
  spit(dir / "out/keep.txt", "mine");
  std::vector<std::string> args = tiny({"--text", dir / "text.txt", "--batch", "5"});
  args.insert(args.end(), {"--out", dir / "out"});
  expect_clean_failure(train(2, args), 2, {"--batch 5 does not split over 2 ranks"}, dir / "out");
}

// A negative control: two runs whose clipping threshold differs by 2e-5 (relative) must not pass
// for equal, so the 1e-12 above means something (2e-7 already shows at about 1e-12).
TEST(TrainMpi, TheComparisonSeesATinyDifference) {
  TempDir dir;
  spit(dir / "text.txt", repetitive_text());
  for (const char* clip : {"0.5", "0.50001"}) {
    std::vector<std::string> args = tiny({"--text", dir / "text.txt", "--grad-clip", clip});
    args.insert(args.end(), {"--out", dir / clip});
    ASSERT_EQ(train(1, args).status, 0);
  }
  testing::TestPartResultArray failures;
  {
    testing::ScopedFakeTestPartResultReporter intercept(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_same_run(dir / "0.50001", dir / "0.5");
  }
  EXPECT_GT(failures.size(), 0);
}

// One process, two slices: (1 / N) sum_r grad(backprop_r) must be the gradient of the whole
// batch's loss, with slices that count different numbers of targets (row 1 has none at all).
TEST(SliceLoss, IgnoredTargetsWeighAsInTheWholeBatch) {
  const nn::GPTConfig config{.vocab_size = 7, .block_size = 5, .n_layer = 1, .n_head = 1,
                            .n_embd = 8, .dtype = Dtype::f64};
  Rng rng(3);
  const std::unique_ptr<Model> gpt =
      find_arch("gpt")->build(nn::gpt_config_to_json(config), rng);
  nn::Module& model = gpt->module();
  std::vector<int64_t> x(4 * 5), y(4 * 5);
  for (int64_t i = 0; i < 20; ++i) {
    x[i] = (i * 3) % 7;
    y[i] = (i * 5 + 1) % 7;
  }
  for (const int64_t i : {0, 2, 5, 6, 7, 8, 9, 13}) y[i] = -1;  // rank 0: 3 + 0 counted, rank 1: 9
  const data::Batch batch{from_indices(x, {4, 5}), from_indices(y, {4, 5})};

  const SliceLoss whole = slice_loss(*gpt, batch, 0, 1);
  whole.backprop.backward();
  std::vector<std::vector<double>> want;
  for (const Tensor& p : model.parameters()) want.push_back(p.grad().to_vector());
  model.zero_grad();

  double loss = 0;
  for (int r = 0; r < 2; ++r) {
    const SliceLoss part = slice_loss(*gpt, batch, r, 2);
    loss += part.share;
    if (part.backprop.defined()) part.backprop.backward();  // gradients add up over the slices
  }
  EXPECT_LE(rel(loss, whole.share), kTol);
  const std::vector<Tensor> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {  // to kTol of each gradient's largest entry
    const std::vector<double> got = params[i].grad().to_vector();
    double scale = 0, diff = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      scale = std::max(scale, std::abs(want[i][k]));
      diff = std::max(diff, std::abs(got[k] / 2 - want[i][k]));
    }
    EXPECT_LE(diff, kTol * scale) << "parameter " << i;
  }
}

}  // namespace
}  // namespace tg
