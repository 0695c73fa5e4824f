// The `tapegrad` program as a user runs it: a subprocess on .npy files in temporary folders.
//   demo and check:  exit 0 with their key output
//   attention:       the same arrays as an in-process run of the library (bit for bit, up to
//                    1e-15), and as the independent numpy reference tests/attention_reference.py
//                    (1e-12 relative in float64, 1e-5 in float32)
//   --no-weights:    the same arrays but A, in O(T d) memory (T = 4096 in tens of MiB)
//   bad input:       exit 1 or 2, one line on stderr naming the problem, no output file at all
//   failed writes:   --out exactly as before the run, no staging folder left beside it

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include <tapegrad/io/npy.h>
#include "test_util.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using namespace tg::test;  // run, Config, configs, TempDir, ...

const std::string kExe = TAPEGRAD_EXE;
const std::string kReference = TAPEGRAD_REFERENCE_PY;

// ---- demo and check -----------------------------------------------------------------------

TEST(Cli, DemoWalksThroughTheLesson) {
  const Outcome r = run(kExe, {"demo"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* section : {"Self-test (b)", "Self-test (c)", "Self-test (d)", "Self-test (e)",
                              "Multi-head", "Every check passed."})
    EXPECT_NE(r.out.find(section), std::string::npos) << "missing: " << section;
}

TEST(Cli, CheckPassesEveryOpAndModel) {
  const Outcome r = run(kExe, {"check"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(" checks, "), std::string::npos);
  EXPECT_NE(r.out.find(" passed, 0 failed\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model/multi_head"), std::string::npos);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  // Forward mode has rows of its own: the ops, both models and the tiny GPT.
  for (const char* name : {"softmax/", "model/single_head ", "model/multi_head/", "model/gpt/tanh "}) {
    bool forward_row = false;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      forward_row |= line.starts_with(name) && line.find(" forward ") != std::string::npos;
    EXPECT_TRUE(forward_row) << "no forward row for " << name;
  }
}

// ---- attention end to end -----------------------------------------------------------------

TEST(CliAttention, MatchesTheLibraryInProcess) {
  uint64_t seed = 100;
  for (const Config& c : configs()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    fs::create_directories(dir / "in");
    write_inputs(c, dir / "in", ++seed);
    const Outcome r = run(kExe, attention_args("attention", c, dir / "in", dir / "out"));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out + r.err, "");
    const Arrays got = read_outputs(dir / "out");
    ASSERT_TRUE(got.count("A") && got.count("loss"));
    EXPECT_EQ(got.at("A").shape().str(), expected_A_shape(c).str());
    EXPECT_EQ(got.at("loss").rank(), 0);
    const double rel = max_rel_diff(got, in_process(c, dir / "in"));
    EXPECT_LE(rel, 1e-15);
    RecordProperty("max_rel_diff_" + c.name, sci(rel));  // --gtest_output=xml only
  }
}

TEST(CliAttention, MatchesTheNumpyReference) {
  TG_REQUIRE_PYTHON("numpy");
  uint64_t seed = 200;
  for (const Config& c : configs()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    fs::create_directories(dir / "in");
    write_inputs(c, dir / "in", ++seed);
    const Outcome ours = run(kExe, attention_args("attention", c, dir / "in", dir / "out"));
    ASSERT_EQ(ours.status, 0) << ours.err;
    const Outcome ref = run(kPython, attention_args(kReference, c, dir / "in", dir / "ref"));
    ASSERT_EQ(ref.status, 0) << ref.err;
    const double rel = max_rel_diff(read_outputs(dir / "out"), read_outputs(dir / "ref"));
    EXPECT_LE(rel, c.dtype == Dtype::f32 ? 1e-5 : 1e-12);
    RecordProperty("max_rel_diff_" + c.name, sci(rel));  // --gtest_output=xml only
  }
}

TEST(CliAttention, NumpyReferenceGradientsMatchFiniteDifferences) {
  TG_REQUIRE_PYTHON("numpy");
  const Outcome r = run(kPython, {kReference, "--selftest"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
}

TEST(CliAttention, CreatesNestedOutputFolders) {
  TempDir dir;
  const Config& c = configs().front();
  fs::create_directories(dir / "in");
  write_inputs(c, dir / "in", 1);
  const fs::path out = dir / "a/b/c";
  const Outcome r = run(kExe, attention_args("attention", c, dir / "in", out));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(files_in(out), (std::set<std::string>{"A.npy", "Y.npy", "dW_K.npy", "dW_Q.npy",
                                                  "dW_V.npy", "dX.npy", "loss.npy"}));
}

// A write that fails half-way (loss.npy is a folder) takes back what this run wrote.
TEST(CliAttention, FailedWriteLeavesNoPartialOutput) {
  TempDir dir;
  const Config& c = configs().front();
  fs::create_directories(dir / "in");
  write_inputs(c, dir / "in", 1);
  fs::create_directories(dir / "out/loss.npy");
  spit(dir / "out/loss.npy/keep", "x");
  const Outcome r = run(kExe, attention_args("attention", c, dir / "in", dir / "out"));
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(r.crashed);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("loss.npy"), std::string::npos) << r.err;
  EXPECT_EQ(files_in(dir / "out"), std::set<std::string>{"loss.npy"});
  EXPECT_EQ(files_in(dir / "."), (std::set<std::string>{"in", "out"}));
}

// ---- --no-weights and the all-or-nothing output folder ------------------------------------

TEST(CliAttention, NoWeightsMatchesTheWeightsPath) {
  uint64_t seed = 300;
  for (const Config& c : configs()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    fs::create_directories(dir / "in");
    write_inputs(c, dir / "in", ++seed);
    Config fused = c;
    fused.options.need_weights = false;
    const Outcome w = run(kExe, attention_args("attention", c, dir / "in", dir / "weights"));
    const Outcome f = run(kExe, attention_args("attention", fused, dir / "in", dir / "fused"));
    ASSERT_EQ(w.status, 0) << w.err;
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_EQ(f.out + f.err, "");
    Arrays expected = read_outputs(dir / "weights");
    expected.erase("A");
    EXPECT_LE(max_rel_diff(read_outputs(dir / "fused"), expected),
              c.dtype == Dtype::f32 ? 1e-5 : 1e-12);
  }
}

// T = 4096 with 4 heads: the weights alone would take 4 * 4096^2 * 4 bytes = 256 MiB (the
// composed path keeps several such arrays, GiBs); the fused path needs tens of MiB.
TEST(CliAttention, NoWeightsRunsLongSequencesInLittleMemory) {
  constexpr int64_t T = 4096, D = 64;
  const Config c{"long", {T, D}, D, D, true, opts(4), Dtype::f32};
  TempDir dir;
  fs::create_directories(dir / "in");
  write_inputs(c, dir / "in", 9);
  Config fused = c;
  fused.options.need_weights = false;
  const Outcome r = run(kExe, attention_args("attention", fused, dir / "in", dir / "out"));
  ASSERT_EQ(r.status, 0) << r.err;
  rusage children{};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &children), 0);
  EXPECT_LT(children.ru_maxrss, 200 * 1024) << "peak RSS in KiB of the largest child";
  EXPECT_EQ(files_in(dir / "out"), (std::set<std::string>{"Y.npy", "dW_K.npy", "dW_O.npy",
                                                          "dW_Q.npy", "dW_V.npy", "dX.npy",
                                                          "loss.npy"}));
  const Tensor Y = read_npy((dir / "out/Y.npy").string());
  EXPECT_EQ(Y.shape().str(), Shape({T, D}).str());
  EXPECT_EQ(dtype_name(Y.dtype()), dtype_name(Dtype::f32));
}

// A run that fails while moving its files into --out (dW_V.npy is a folder there, and the
// files before it were already moved in) puts every earlier file back, byte for byte.
TEST(CliAttention, FailedCommitLeavesThePreviousRunIntact) {
  TempDir dir;
  const Config& c = configs()[2];  // with W_O: eight outputs
  for (const char* in : {"in", "in2"}) fs::create_directories(dir / in);
  write_inputs(c, dir / "in", 1);
  write_inputs(c, dir / "in2", 2);  // other values: every output file would differ
  ASSERT_EQ(run(kExe, attention_args("attention", c, dir / "in", dir / "out")).status, 0);
  fs::remove(dir / "out/dW_V.npy");
  fs::create_directories(dir / "out/dW_V.npy");
  spit(dir / "out/dW_V.npy/keep", "x");
  std::map<std::string, std::string> before;
  for (const std::string& f : files_in(dir / "out"))
    if (f != "dW_V.npy") before[f] = slurp(dir / "out" / f);
  ASSERT_EQ(before.size(), 7u);

  const Outcome r = run(kExe, attention_args("attention", c, dir / "in2", dir / "out"));
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(r.crashed);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("dW_V.npy"), std::string::npos) << r.err;
  std::set<std::string> names = {"dW_V.npy"};
  for (const auto& [f, bytes] : before) {
    SCOPED_TRACE(f);
    EXPECT_EQ(slurp(dir / "out" / f), bytes);
    names.insert(f);
  }
  EXPECT_EQ(files_in(dir / "out"), names);
  EXPECT_EQ(files_in(dir / "out/dW_V.npy"), std::set<std::string>{"keep"});
  EXPECT_EQ(files_in(dir / "."), (std::set<std::string>{"in", "in2", "out"}))
      << "a staging folder was left beside --out";
}

// --out holds exactly one run's outputs: A.npy of an earlier run with weights goes away.
TEST(CliAttention, NoWeightsRunRemovesAnEarlierA) {
  TempDir dir;
  Config c = configs().front();
  fs::create_directories(dir / "in");
  write_inputs(c, dir / "in", 3);
  ASSERT_EQ(run(kExe, attention_args("attention", c, dir / "in", dir / "out")).status, 0);
  ASSERT_TRUE(files_in(dir / "out").count("A.npy"));
  spit(dir / "out/notes.txt", "mine");
  c.options.need_weights = false;
  const Outcome r = run(kExe, attention_args("attention", c, dir / "in", dir / "out"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(files_in(dir / "out"), (std::set<std::string>{"Y.npy", "dW_K.npy", "dW_Q.npy",
                                                          "dW_V.npy", "dX.npy", "loss.npy",
                                                          "notes.txt"}));
  EXPECT_EQ(files_in(dir / "."), (std::set<std::string>{"in", "out"}));
}

}  // namespace
}  // namespace tg
