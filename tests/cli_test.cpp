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
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "ops/reshape.h"
#include "io/npy.h"

namespace tg {
namespace {

namespace fs = std::filesystem;

const std::string kExe = TAPEGRAD_EXE;
const std::string kReference = TAPEGRAD_REFERENCE_PY;
const std::string kPython = "/usr/bin/python3";

// ---- processes and folders ----------------------------------------------------------------

// A fresh folder under the system temp folder, removed with its contents afterwards.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("tapegrad_cli_test_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Outcome {
  int status = -1;       // the exit status, when the program exited
  bool crashed = false;  // killed by a signal (the shell reports 128 + signal)
  std::string out, err;
};

// Runs program with args, stdin empty, stdout and stderr captured.
Outcome run(const std::string& program, const std::vector<std::string>& args) {
  TempDir io;
  std::string cmd = quote(program);
  for (const std::string& a : args) cmd.append(" ").append(quote(a));
  cmd.append(" </dev/null >").append(quote((io / "out").string()));
  cmd.append(" 2>").append(quote((io / "err").string()));
  const int raw = std::system(cmd.c_str());
  Outcome r;
  r.crashed = raw == -1 || !WIFEXITED(raw) || WEXITSTATUS(raw) >= 128;
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  r.out = slurp(io / "out");
  r.err = slurp(io / "err");
  return r;
}

bool have_numpy() {
  static const bool ok =
      std::system((kPython + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename());
  return names;
}

// ---- attention inputs and outputs ---------------------------------------------------------

struct Config {
  std::string name;
  std::vector<int64_t> x_shape;  // (T, D) or (B, T, D)
  int64_t d_k, d_v;
  bool w_o;
  AttentionOptions options;
  Dtype dtype = Dtype::f64;
  bool x_file_f32 = false;  // store X.npy as float32 (converted on reading)
};

AttentionOptions opts(int64_t heads, int64_t window = 0, bool scale = true, bool rope = false,
                      double base = 10000.0) {
  AttentionOptions o;
  o.heads = heads;
  o.window = window;
  o.scale = scale;
  o.rope = rope;
  o.rope_base = base;
  o.need_weights = true;  // the tool writes A.npy unless --no-weights
  return o;
}

// `first` (the subcommand or the reference script), then the flags that ask for c's options.
std::vector<std::string> attention_args(const std::string& first, const Config& c,
                                        const fs::path& in, const fs::path& out) {
  std::vector<std::string> a = {first, "--in", in.string(), "--out", out.string()};
  const AttentionOptions& o = c.options;
  if (o.heads != 1) a.insert(a.end(), {"--heads", std::to_string(o.heads)});
  if (o.window != 0) a.insert(a.end(), {"--window", std::to_string(o.window)});
  if (!o.scale) a.push_back("--no-scale");
  if (o.rope) a.push_back("--rope");
  if (o.rope_base != 10000.0) {
    char base[32];
    std::snprintf(base, sizeof base, "%.17g", o.rope_base);
    a.insert(a.end(), {"--rope-base", base});
  }
  if (c.dtype == Dtype::f32) a.insert(a.end(), {"--dtype", "f32"});
  if (!o.need_weights) a.push_back("--no-weights");  // ours only, not the numpy reference's
  return a;
}

// Writes X, W_Q, W_K, W_V (and W_O) of config c into `in`, from a seed of its own.
void write_inputs(const Config& c, const fs::path& in, uint64_t seed) {
  Rng rng(seed);
  const int64_t D = c.x_shape.back();
  const Tensor X = randn(Shape(c.x_shape), rng);
  write_npy((in / "X.npy").string(), c.x_file_f32 ? X.to(Dtype::f32) : X);
  write_npy((in / "W_Q.npy").string(), randn({D, c.d_k}, rng, Dtype::f64, 0.5));
  write_npy((in / "W_K.npy").string(), randn({D, c.d_k}, rng, Dtype::f64, 0.5));
  write_npy((in / "W_V.npy").string(), randn({D, c.d_v}, rng, Dtype::f64, 0.5));
  if (c.w_o) write_npy((in / "W_O.npy").string(), randn({c.d_v, c.d_v}, rng, Dtype::f64, 0.5));
}

using Arrays = std::map<std::string, Tensor>;

// What `tapegrad attention` should write, computed here with the library itself.
Arrays in_process(const Config& c, const fs::path& in) {
  auto load = [&](const std::string& name) {
    return read_npy((in / (name + ".npy")).string()).to(c.dtype).set_requires_grad();
  };
  const Tensor X = load("X"), W_Q = load("W_Q"), W_K = load("W_K"), W_V = load("W_V");
  const Tensor W_O = c.w_o ? load("W_O") : Tensor();
  const AttentionOutput out = c.options.heads == 1
                                  ? single_head_attention(X, W_Q, W_K, W_V, W_O, c.options)
                                  : multi_head_attention(X, W_Q, W_K, W_V, W_O, c.options);
  const Tensor L = attention_loss(out.Y);
  L.backward();
  Tensor A = out.A.detach();
  if (c.options.heads == 1 && X.rank() == 3)
    A = reshape(A, {X.size(0), 1, X.size(1), X.size(1)});  // (B, T, T) -> (B, 1, T, T)
  Arrays a = {{"Y", out.Y.detach()}, {"A", A},           {"loss", L.detach()},
              {"dX", X.grad()},      {"dW_Q", W_Q.grad()}, {"dW_K", W_K.grad()},
              {"dW_V", W_V.grad()}};
  if (c.w_o) a["dW_O"] = W_O.grad();
  return a;
}

Arrays read_outputs(const fs::path& out) {
  Arrays a;
  for (const std::string& f : files_in(out))
    a[f.substr(0, f.size() - 4)] = read_npy((out / f).string());  // "dX.npy" -> "dX"
  return a;
}

// A: (T, T) for a 2-D X and one head, (H, T, T) for a 2-D X, (B, H, T, T) for a 3-D X.
Shape expected_A_shape(const Config& c) {
  const int64_t T = c.x_shape[c.x_shape.size() - 2], H = c.options.heads;
  if (c.x_shape.size() == 3) return {c.x_shape[0], H, T, T};
  return H == 1 ? Shape{T, T} : Shape{H, T, T};
}

// max |a - b| / max |b| over every array of `expected`, after checking names, shapes, dtypes.
double max_rel_diff(const Arrays& got, const Arrays& expected) {
  std::set<std::string> got_names, expected_names;
  for (const auto& [name, t] : got) got_names.insert(name);
  for (const auto& [name, t] : expected) expected_names.insert(name);
  EXPECT_EQ(got_names, expected_names);
  double worst = 0;
  for (const auto& [name, b] : expected) {
    if (!got.count(name)) continue;
    const Tensor& a = got.at(name);
    SCOPED_TRACE(name + ".npy");
    EXPECT_EQ(a.shape().str(), b.shape().str());
    EXPECT_EQ(dtype_name(a.dtype()), dtype_name(b.dtype()));
    if (a.shape() != b.shape()) return std::numeric_limits<double>::infinity();
    const auto va = a.to_vector(), vb = b.to_vector();
    double diff = 0, scale = 0;
    for (std::size_t k = 0; k < va.size(); ++k) {
      diff = std::max(diff, std::fabs(va[k] - vb[k]));  // NaN stays out: caught below
      scale = std::max(scale, std::fabs(vb[k]));
      EXPECT_TRUE(std::isfinite(va[k])) << "element " << k;
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

const std::vector<Config>& configs() {
  static const std::vector<Config> c = {
      {"2d_single", {6, 4}, 4, 4, false, opts(1)},
      {"2d_T1", {1, 4}, 4, 2, false, opts(1)},
      {"2d_single_W_O_window1", {6, 4}, 4, 3, true, opts(1, 1)},
      {"2d_single_rope_no_scale", {7, 5}, 4, 4, false, opts(1, 0, false, true)},
      {"3d_B1_single", {1, 5, 4}, 4, 4, false, opts(1)},
      {"3d_B3_single_W_O_window3", {3, 6, 5}, 6, 3, true, opts(1, 3)},
      {"2d_H2_W_O", {7, 6}, 8, 4, true, opts(2)},
      {"3d_B2_H3_rope", {2, 6, 6}, 6, 6, false, opts(3, 0, true, true)},
      {"3d_B2_H2_rope_base50_window3_W_O", {2, 7, 4}, 4, 6, true, opts(2, 3, true, true, 50.0)},
      {"3d_B2_H2_no_scale_window1", {2, 5, 4}, 4, 4, false, opts(2, 1, false)},
      {"3d_B2_H4_T16_rope_window5_W_O", {2, 16, 8}, 8, 8, true, opts(4, 5, true, true)},
      {"2d_X_stored_f32", {5, 4}, 4, 4, true, opts(1), Dtype::f64, true},
      {"f32_2d_single", {6, 4}, 4, 4, false, opts(1), Dtype::f32},
      {"f32_3d_B2_H2_rope_W_O_window3", {2, 6, 4}, 4, 4, true, opts(2, 3, true, true),
       Dtype::f32},
  };
  return c;
}

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
  if (!have_numpy()) GTEST_SKIP() << kPython << " cannot import numpy";
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
  if (!have_numpy()) GTEST_SKIP() << kPython << " cannot import numpy";
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

// ---- bad input ----------------------------------------------------------------------------

// The bytes of a .npy file with any header (numpy's layout: data at a multiple of 64 bytes).
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                      const std::string& fortran = "False") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + fortran +
                       ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xFF) +
         static_cast<char>(header.size() >> 8) + header + data;
}

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
      {"Fortran order", put_bytes("W_Q.npy", npy_bytes("<f8", "(4, 4)", f64x16, "True")), att(),
       1, {"W_Q.npy", "Fortran"}},
      {"int64 dtype", put_bytes("W_V.npy", npy_bytes("<i8", "(4, 4)", f64x16)), att(), 1,
       {"W_V.npy", "<i8"}},
      {"big-endian", put_bytes("W_K.npy", npy_bytes(">f8", "(4, 4)", f64x16)), att(), 1,
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
