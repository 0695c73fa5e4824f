// `tapegrad attention` on bad input, as a user runs it: each case (missing, malformed and
// non-finite files, wrong shapes, bad flags) exits 1 or 2 with one line on stderr naming the
// problem, and no output file at all.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cli_util.h"
#include <tapegrad/io/npy.h>
#include "npy_util.h"
#include "test_util.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using namespace tg::test;  // run, Config, TempDir, npy, dict, ...

const std::string kExe = TAPEGRAD_EXE;

using Setup = std::function<void(const fs::path& in)>;

Setup put(const std::string& name, const Tensor& t) {
  return [=](const fs::path& in) { write_npy((in / name).string(), t); };
}
Setup put_bytes(const std::string& name, const std::string& bytes) {
  return [=](const fs::path& in) { spit(in / name, bytes); };
}
Setup remove_file(const std::string& name) {
  return [=](const fs::path& in) { fs::remove(in / name); };
}
// Keeps the first `keep` bytes of the file, or drops the last -keep when keep < 0.
Setup cut(const std::string& name, int64_t keep) {
  return [=](const fs::path& in) {
    const std::string bytes = slurp(in / name);
    spit(in / name, bytes.substr(0, keep >= 0 ? keep : bytes.size() + keep));
  };
}
Setup with(const std::string& name, int64_t element, double value) {
  return [=](const fs::path& in) {
    Tensor t = read_npy((in / name).string());
    t.data<double>()[element] = value;
    write_npy((in / name).string(), t);
  };
}

struct BadCase {
  std::string name;
  Setup setup;                         // breaks the good inputs in {in}
  std::vector<std::string> args;       // {in} and {out} stand for the folders
  int status;                          // 1: bad input, 2: bad usage
  std::vector<std::string> fragments;  // each must appear in the one stderr line
};

std::vector<std::string> att(std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"attention", "--in", "{in}", "--out", "{out}"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(CliAttention, BadInputFailsCleanlyWithoutOutput) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::string f64x16(16 * 8, '\0');
  const std::vector<BadCase> cases = {
      {"missing input folder", {}, {"attention", "--in", "{in}/nope", "--out", "{out}"}, 2,
       {"--in", "nope"}},
      {"missing W_K.npy", remove_file("W_K.npy"), att(), 1, {"W_K.npy", "missing"}},
      {"input is a folder",
       [](const fs::path& in) {
         fs::remove(in / "W_V.npy");
         fs::create_directory(in / "W_V.npy");
       },
       att(), 1, {"W_V.npy"}},
      {"garbage bytes", put_bytes("X.npy", "these are not numpy bytes"), att(), 1,
       {"X.npy", "not a .npy file"}},
      {"empty file", put_bytes("X.npy", ""), att(), 1, {"X.npy", "empty"}},
      {"truncated header", cut("W_Q.npy", 30), att(), 1, {"W_Q.npy"}},
      {"truncated data", cut("W_Q.npy", -3), att(), 1, {"W_Q.npy", "125 bytes"}},
      {"Fortran order", put_bytes("W_Q.npy", npy(dict("'<f8'", "(4, 4)", "True"), f64x16)), att(),
       1, {"W_Q.npy", "Fortran"}},
      {"int64 dtype", put_bytes("W_V.npy", npy(dict("'<i8'", "(4, 4)"), f64x16)), att(), 1,
       {"W_V.npy", "<i8"}},
      {"big-endian", put_bytes("W_K.npy", npy(dict("'>f8'", "(4, 4)"), f64x16)), att(), 1,
       {"W_K.npy", "big-endian"}},
      {"X of rank 1", put("X.npy", zeros({4})), att(), 1, {"X (4,)"}},
      {"empty X", put("X.npy", zeros({2, 0, 4})), att(), 1, {"X.npy", "empty"}},
      {"W_Q rows != D", put("W_Q.npy", zeros({3, 4})), att(), 1, {"W_Q (3, 4)", "D = 4"}},
      {"W_K shape != W_Q", put("W_K.npy", zeros({4, 2})), att(), 1, {"W_K (4, 2)"}},
      {"W_O wrong shape", put("W_O.npy", zeros({4, 3})), att(), 1, {"W_O (4, 3)", "(4, 4)"}},
      {"H does not divide d_k", {}, att({"--heads", "3"}), 1, {"3 heads", "d_k = 4"}},
      {"RoPE on odd head size", {}, att({"--heads", "4", "--rope"}), 1, {"RoPE", "d_k/H = 1"}},
      {"NaN in X", with("X.npy", 5, nan), att(), 1, {"X.npy", "nan", "(0, 1, 1)"}},
      {"inf in W_V", with("W_V.npy", 0, -inf), att(), 1, {"W_V.npy", "inf"}},
      {"too large for f32", with("X.npy", 3, 1e300), att({"--dtype", "f32"}), 1,
       {"X.npy", "float32"}},
      {"projection overflows in float64",
       [](const fs::path& in) {
         with("X.npy", 0, 1e200)(in);
         with("W_Q.npy", 0, 1e200)(in);
       },
       att(), 1, {"Q = X W_Q", "overflowed", "float64"}},
      {"overflow in float32", with("X.npy", 0, 1e30), att({"--dtype", "f32"}), 1,
       {"overflowed", "float32"}},
      {"--window 0", {}, att({"--window", "0"}), 2, {"--window"}},
      {"--heads 0", {}, att({"--heads", "0"}), 2, {"--heads"}},
      {"--heads not a number", {}, att({"--heads", "two"}), 2, {"--heads"}},
      {"--rope-base -1", {}, att({"--rope", "--rope-base", "-1"}), 2, {"--rope-base"}},
      {"--dtype f16", {}, att({"--dtype", "f16"}), 2, {"--dtype", "f16"}},
      {"unknown flag", {}, att({"--frobnicate"}), 2, {"--frobnicate"}},
      {"--out is a file", [](const fs::path& in) { spit(in.parent_path() / "out", "x"); }, att(),
       1, {"/out", "cannot create the output folder"}},
      {"missing --out", {}, {"attention", "--in", "{in}"}, 2, {"--out"}},
      {"no subcommand", {}, {}, 2, {"subcommand"}},
      {"unknown subcommand", {}, {"frobnicate"}, 2, {"frobnicate"}},
  };
  const Config good{"good", {2, 5, 4}, 4, 4, true, opts(1)};
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const fs::path in = dir / "in", out = dir / "out";
    fs::create_directories(in);
    write_inputs(good, in, 7);
    if (c.setup) c.setup(in);
    std::vector<std::string> args;
    for (std::string a : c.args) {
      for (const auto& [key, value] : {std::pair{"{in}", in}, std::pair{"{out}", out}})
        if (const auto p = a.find(key); p != std::string::npos)
          a.replace(p, std::string(key).size(), value.string());
      args.push_back(a);
    }
    const Outcome r = run(kExe, args);
    EXPECT_FALSE(r.crashed);
    EXPECT_EQ(r.status, c.status) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(r.err.empty());
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.err.ends_with('\n')) << r.err;
    for (const std::string& f : c.fragments)
      EXPECT_NE(r.err.find(f), std::string::npos) << "expected '" << f << "' in: " << r.err;
    EXPECT_TRUE(files_in(out).empty()) << "files left in --out";
  }
}

}  // namespace
}  // namespace tg
