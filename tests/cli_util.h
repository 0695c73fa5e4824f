#pragma once
// What the command-line suites share: running a program (or a shell command line) with its
// output captured, a text to train on, and the attention configurations with their inputs,
// outputs and an in-process run of the library.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/reshape.h>
#include "test_util.h"

namespace tg::test {

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Outcome {
  int status = -1;       // the exit status, when the program exited
  bool crashed = false;  // killed by a signal (the shell reports 128 + signal)
  std::string out, err;
};

// " 'a' 'b'": each argument quoted for the shell, each after a space.
inline std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s.append(" ").append(quote(a));
  return s;
}

// Runs a shell command line, stdin empty, stdout and stderr captured.
inline Outcome run_shell(const std::string& command) {
  TempDir io;
  std::string cmd = command;
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

// Runs program with args, stdin empty, stdout and stderr captured.
inline Outcome run(const std::string& program, const std::vector<std::string>& args) {
  return run_shell(quote(program) + joined(args));
}

inline std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename());
  return names;
}

// A repetitive text of a few hundred words for `tapegrad train --text` (fixed, so the vocabulary
// is known).
inline std::string repetitive_text() {
  const char* words[] = {"the cat sat on the mat. ", "a dog ran to the park. ",
                         "hello world, hello tapegrad. "};
  std::string text;
  uint64_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(state >> 33) % 3];
  }
  return text;
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

inline AttentionOptions opts(int64_t heads, int64_t window = 0, bool scale = true,
                             bool rope = false, double base = 10000.0) {
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
inline std::vector<std::string> attention_args(const std::string& first, const Config& c,
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
inline void write_inputs(const Config& c, const fs::path& in, uint64_t seed) {
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
inline Arrays in_process(const Config& c, const fs::path& in) {
  auto load = [&](const std::string& name) {
    return read_npy((in / (name + ".npy")).string()).detach().to(c.dtype).set_requires_grad();
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

inline Arrays read_outputs(const fs::path& out) {
  Arrays a;
  for (const std::string& f : files_in(out))
    a[f.substr(0, f.size() - 4)] = read_npy((out / f).string());  // "dX.npy" -> "dX"
  return a;
}

// A: (T, T) for a 2-D X and one head, (H, T, T) for a 2-D X, (B, H, T, T) for a 3-D X.
inline Shape expected_A_shape(const Config& c) {
  const int64_t T = c.x_shape[c.x_shape.size() - 2], H = c.options.heads;
  if (c.x_shape.size() == 3) return {c.x_shape[0], H, T, T};
  return H == 1 ? Shape{T, T} : Shape{H, T, T};
}

// max |a - b| / max |b| over every array of `expected`, after checking names, shapes, dtypes.
inline double max_rel_diff(const Arrays& got, const Arrays& expected) {
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

inline const std::vector<Config>& configs() {
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

}  // namespace tg::test
