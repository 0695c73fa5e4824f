// libFuzzer target for `tapegrad attention`, run in-process through tg::run_attention.
//
// Input layout (kept simple so that mutations stay meaningful):
//   byte 0   heads = 1 + (b & 3), window = (b >> 2) % 5
//   byte 1   bit 0 --no-scale, bit 1 --rope, bit 2 --dtype f32, bits 3-5 the rope base (from
//            kRopeBases, some invalid on purpose), bit 6 the out dir exists (empty) beforehand,
//            bit 7 the out path is a regular file (the run must fail and leave it alone)
//   rest     up to 5 payloads separated by kSep: X, W_Q, W_K, W_V, W_O; an empty payload means
//            the file is absent, fewer than 5 payloads mean no W_O.npy.
// The contract checked (bad input: one clear line, no partial output): run_attention either throws
// a tg::Error whose message is one printable line and leaves no file in the out dir, or writes
// exactly the expected files, each a readable .npy of the expected shape and dtype, finite, with
// causal weights whose rows sum to 1 and loss = 0.5 * sum(Y^2); either way no staging folder is
// left beside the out dir. Anything else (another exception type, a crash, a sanitizer report)
// aborts.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <tapegrad/autograd/storage.h>
#include "fuzz/fuzz_util.h"
#include <tapegrad/ops/threads.h>
#include "tools/commands.h"
#include <tapegrad/io/npy.h>

const char tg::fuzz::kTarget[] = "attention_fuzz";

namespace {

namespace fs = std::filesystem;
using tg::fuzz::bug;
using tg::fuzz::write_file;

constexpr std::string_view kSep = "|npy|";
constexpr const char* kNames[] = {"X", "W_Q", "W_K", "W_V", "W_O"};
constexpr double kRopeBases[] = {10000.0, 100.0, 2.0, 1.0, 0.5, 0.0, -10.0,
                                 std::numeric_limits<double>::quiet_NaN()};
// Inputs whose attention would be large are skipped, so that every unit stays fast.
constexpr int64_t kMaxNumel = 1 << 16;
constexpr int64_t kMaxWeights = 1 << 16;  // B * H * T * T

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

void check_message(const char* what, const char* type) {
  const std::string_view m(what);
  if (m.empty()) bug(std::string(type) + " with an empty message");
  if (!tg::fuzz::one_printable_line(m))
    bug(std::string(type) + " message is not one printable line: " + std::string(m));
}

std::vector<std::string_view> split_payloads(std::string_view rest) {
  std::vector<std::string_view> parts;
  while (parts.size() < 5) {
    const std::size_t at = rest.find(kSep);
    parts.push_back(rest.substr(0, at));
    if (at == std::string_view::npos) break;
    rest.remove_prefix(at + kSep.size());
  }
  return parts;
}

// The shapes the tool should produce, or nullopt when it should not get that far anyway.
struct Plan {
  std::vector<std::pair<std::string, tg::Shape>> files;  // name (no .npy) and shape
  int64_t window = 0;
};

// Parses the payloads the way the tool will; returns false when the input is too large to run.
bool plan_run(const std::vector<std::string_view>& parts, int64_t H, std::optional<Plan>& plan) {
  std::vector<tg::Tensor> t(5);
  bool all = true;
  for (std::size_t i = 0; i < 5; ++i) {
    if (i >= parts.size() || parts[i].empty()) {
      if (i < 4) all = false;
      continue;
    }
    try {
      t[i] = tg::read_npy_bytes(std::string(parts[i]), kNames[i]);
    } catch (const tg::IoError&) {
      all = false;  // the tool will reject it (checked by npy_fuzz in depth)
      continue;
    }
    if (t[i].numel() > kMaxNumel) return false;
  }
  if (!all) return true;
  const tg::Tensor &X = t[0], &W_Q = t[1], &W_K = t[2], &W_V = t[3], &W_O = t[4];
  if ((X.rank() != 2 && X.rank() != 3) || W_Q.rank() != 2 || W_V.rank() != 2) return true;
  const bool batched = X.rank() == 3;
  const int64_t B = batched ? X.size(0) : 1, T = X.size(-2);
  if (B > 0 && T > 0 && (B * H > kMaxWeights / T / T)) return false;
  Plan p;
  std::vector<int64_t> y = X.shape().vec();
  y.back() = W_V.size(1);
  p.files.emplace_back("Y", tg::Shape(y));
  if (!batched)
    p.files.emplace_back("A", H == 1 ? tg::Shape{T, T} : tg::Shape{H, T, T});
  else
    p.files.emplace_back("A", tg::Shape{B, H, T, T});
  p.files.emplace_back("loss", tg::Shape{});
  for (std::size_t i = 0; i < 5; ++i)
    if (t[i].defined()) p.files.emplace_back(std::string("d") + kNames[i], t[i].shape());
  (void)W_K;
  (void)W_O;
  plan = std::move(p);
  return true;
}

// A: every entry in [0, 1], exactly 0 outside the causal window, each row summing to 1.
void check_weights(const tg::Tensor& A, int64_t window, double tol) {
  const int64_t T = A.size(-1);
  const std::vector<double> a = A.to_vector();
  for (std::size_t r = 0; r < a.size() / T; ++r) {
    const int64_t i = static_cast<int64_t>(r % T);
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) {
      const double v = a[r * T + j];
      const bool hidden = j > i || (window > 0 && j <= i - window);
      if (hidden && v != 0) bug("A: a masked weight is not exactly 0");
      if (!(v >= 0 && v <= 1 + tol)) bug("A: a weight outside [0, 1]: " + std::to_string(v));
      sum += v;
    }
    if (std::abs(sum - 1) > tol) bug("A: a row sums to " + std::to_string(sum));
  }
}

void check_outputs(const fs::path& out, const Plan& plan, tg::Dtype dtype) {
  std::set<std::string> expected;
  for (const auto& [name, shape] : plan.files) expected.insert(name + ".npy");
  const std::set<std::string> got = files_in(out);
  if (got != expected) {
    std::string g;
    for (const auto& n : got) g += n + " ";
    bug("after a successful run the out dir holds: " + g);
  }
  const double tol = dtype == tg::Dtype::f32 ? 1e-3 : 1e-9;
  tg::Tensor Y, L;
  for (const auto& [name, shape] : plan.files) {
    const tg::Tensor t = tg::read_npy((out / (name + ".npy")).string());  // throws: a bug
    if (!(t.shape() == shape))
      bug(name + ".npy has shape " + t.shape().str() + ", expected " + shape.str());
    if (t.dtype() != dtype) bug(name + ".npy has the wrong dtype");
    for (const double v : t.to_vector())
      if (!std::isfinite(v)) bug(name + ".npy holds a non-finite value");
    if (name == "A") check_weights(t, plan.window, tol);
    if (name == "Y") Y = t;
    if (name == "loss") L = t;
  }
  double half_ss = 0;
  for (const double v : Y.to_vector()) half_ss += 0.5 * v * v;
  if (std::abs(L.item() - half_ss) > tol * std::max(1.0, half_ss))
    bug("loss " + std::to_string(L.item()) + " != 0.5 sum(Y^2) = " + std::to_string(half_ss));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tg::set_num_threads(1);  // deterministic and cheap; threads are thread_test's business
  tg::fuzz::scratch_root();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return -1;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const uint8_t o0 = data[0], o1 = data[1];

  tg::AttentionArgs args;
  args.options.heads = 1 + (o0 & 3);
  args.options.window = (o0 >> 2) % 5;
  args.options.scale = !(o1 & 1);
  args.options.rope = (o1 & 2) != 0;
  args.dtype = (o1 & 4) ? tg::Dtype::f32 : tg::Dtype::f64;
  args.options.rope_base = kRopeBases[(o1 >> 3) & 7];
  const bool out_exists = (o1 & 0x40) != 0;
  const bool out_is_file = (o1 & 0x80) != 0;

  const std::vector<std::string_view> parts = split_payloads(input.substr(2));
  std::optional<Plan> plan;
  if (!plan_run(parts, args.options.heads, plan)) return -1;  // too large: not worth the time
  if (plan) plan->window = args.options.window;

  const fs::path& root = tg::fuzz::scratch_root();
  const fs::path in = root / "in", out = root / "out";
  std::error_code ec;
  fs::remove_all(in, ec);
  fs::remove_all(out, ec);
  fs::create_directory(in);
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (!parts[i].empty()) write_file(in / (std::string(kNames[i]) + ".npy"), parts[i]);
  const std::string file_content = "not a folder";
  if (out_is_file)
    write_file(out, file_content);
  else if (out_exists)
    fs::create_directory(out);
  args.in_dir = in.string();
  args.out_dir = out.string();

  bool ok = false;
  try {
    tg::run_attention(args);
    ok = true;
  } catch (const tg::Error& e) {
    check_message(e.what(), "tg::Error");
  } catch (const std::exception& e) {
    bug(std::string("run_attention threw a non-tg exception: ") + e.what());
  } catch (...) {
    bug("run_attention threw a non-std exception");
  }

  if (out_is_file) {
    if (ok) bug("run_attention succeeded with a regular file as the out dir");
    if (!fs::is_regular_file(out, ec) || read_file(out) != file_content)
      bug("a failed run changed the regular file given as the out dir");
  } else if (!ok) {
    const std::set<std::string> left = files_in(out);
    if (!left.empty()) bug("a failed run left " + *left.begin() + " in the out dir");
    if (!out_exists && fs::exists(out, ec)) bug("a failed run left the out dir it created");
  } else {
    if (!plan) bug("run_attention succeeded on inputs that should not parse");
    check_outputs(out, *plan, args.dtype);
  }
  for (const std::string& name : files_in(root))  // the staging folder beside out is gone
    if (name != "in" && name != "out") bug("run_attention left " + name + " beside the out dir");
  // Hand the cached buffers back to malloc: ASan then sees every free, and a long run's memory
  // does not grow with the many distinct sizes the fuzzer tries (the cache keeps up to 4 GB).
  tg::empty_cache();
  return 0;
}
