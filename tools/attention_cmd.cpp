// `tapegrad attention`: causal self-attention on .npy inputs, with the gradient of every input.
//
//   read:     X (T, D) or (B, T, D), W_Q, W_K (D, d_k), W_V (D, d_v), [W_O (d_v, d_v)]
//   compute:  Y = attention(X; W), A its weights, L = 0.5 * sum(Y^2), then backward
//   write:    Y, [A], loss, dX, dW_Q, dW_K, dW_V, [dW_O]
//
// Everything that can fail on the inputs (reading, values, shapes, the computation itself) runs
// before the first file is written. The files then go into a staging folder next to --out and
// move into --out together, so a failure anywhere leaves --out exactly as it was.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <tapegrad/ops/reshape.h>
#include "tools/commands.h"
#include <tapegrad/io/npy.h>

namespace tg {

namespace {

namespace fs = std::filesystem;

// Throws ValueError naming `what` at the first NaN or inf of t; `why` ends the message.
void require_finite(const Tensor& t, const std::string& what, const std::string& why) {
  const std::vector<double> v = t.to_vector();
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]))
      throw ValueError(what + ": non-finite value " + std::to_string(v[k]) + " at index " +
                       t.shape().index_str(static_cast<int64_t>(k)) + why);
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// Reads dir/name.npy as a requires_grad leaf in `dtype`: finite, non-empty. Throws IoError for
// a missing or malformed file, ValueError for its values.
Tensor load_input(const fs::path& dir, const std::string& name, Dtype dtype) {
  const fs::path path = dir / (name + ".npy");
  if (!is_file(path))
    throw IoError(path.string() + ": missing input file (the folder needs X.npy, W_Q.npy, "
                  "W_K.npy and W_V.npy, and W_O.npy for an output projection)");
  const Tensor raw = read_npy(path.string());
  if (raw.numel() == 0)
    throw ValueError(path.string() + ": the array is empty, shape " + raw.shape().str());
  require_finite(raw, path.string(), "; inputs must be finite");
  Tensor t = raw.dtype() == dtype ? raw : raw.to(dtype);
  if (dtype != raw.dtype())  // float64 values beyond float32's range become inf
    require_finite(t, path.string(), " after conversion to float32 (out of range)");
  return t.set_requires_grad();
}

// The files of one run, in the order they are written.
std::vector<std::pair<std::string, Tensor>> compute(const AttentionArgs& args) {
  const fs::path in(args.in_dir);
  std::error_code ec;
  if (!fs::is_directory(in, ec))
    throw IoError(args.in_dir + ": the input folder does not exist or is not a folder");
  const Dtype dtype = args.dtype;
  const Tensor X = load_input(in, "X", dtype);
  const Tensor W_Q = load_input(in, "W_Q", dtype);
  const Tensor W_K = load_input(in, "W_K", dtype);
  const Tensor W_V = load_input(in, "W_V", dtype);
  const Tensor W_O = is_file(in / "W_O.npy") ? load_input(in, "W_O", dtype) : Tensor();

  // need_weights: the composed ops, which keep the weights for A.npy; without it the fused op,
  // O(T d) memory, and no A.npy.
  const AttentionOptions& o = args.options;
  AttentionOutput out;
  try {
    out = o.heads == 1 ? single_head_attention(X, W_Q, W_K, W_V, W_O, o)
                       : multi_head_attention(X, W_Q, W_K, W_V, W_O, o);
  } catch (const ShapeError& e) {
    throw ShapeError("inputs in " + args.in_dir + " do not fit: " + e.what());
  }
  // Finite inputs can still overflow (large values, or float32): refuse to write inf or NaN,
  // and weights whose row lost every visible score to overflow (-inf everywhere gives zeros).
  const std::string hint = "; the computation overflowed (inputs too large for " +
                           std::string(dtype_name(dtype)) + "?)";
  require_finite(out.Q, "Q = X W_Q", hint);
  require_finite(out.K, "K = X W_K", hint);
  require_finite(out.V, "V = X W_V", hint);
  if (o.need_weights) {
    const std::vector<double> a = out.A.to_vector();
    const int64_t T = out.A.size(-1);
    for (std::size_t r = 0; r * T < a.size(); ++r) {
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) sum += a[r * T + j];
      if (!(sum > 0.5))
        throw ValueError("A: row " + std::to_string(r) + " of the attention weights is all zero" +
                         hint);
    }
  }
  const Tensor L = attention_loss(out.Y);  // 0.5 * sum(Y^2)
  L.backward();

  auto grad_of = [](const Tensor& leaf) {
    return leaf.grad().defined() ? leaf.grad() : zeros(leaf.shape(), leaf.dtype());
  };
  std::vector<std::pair<std::string, Tensor>> files = {{"Y", out.Y.detach()}};
  if (o.need_weights) {
    // A: (T, T) for a 2-D X and one head, else (H, T, T) or (B, H, T, T); one head over a 3-D
    // X computes (B, T, T), written as (B, 1, T, T).
    Tensor A = out.A.detach();
    if (o.heads == 1 && X.rank() == 3) A = reshape(A, {X.size(0), 1, X.size(1), X.size(1)});
    files.emplace_back("A", A);
  }
  files.insert(files.end(), {{"loss", L.detach()},
                             {"dX", grad_of(X)},
                             {"dW_Q", grad_of(W_Q)},
                             {"dW_K", grad_of(W_K)},
                             {"dW_V", grad_of(W_V)}});
  if (W_O.defined()) files.emplace_back("dW_O", grad_of(W_O));

  for (const auto& [name, t] : files) require_finite(t, name, hint);
  return files;
}

// Every file this command can write. One that an earlier run wrote and this run does not (A.npy
// before a --no-weights run, dW_O.npy before a run without W_O.npy) is removed by the commit, so
// --out never shows an old array beside new ones.
constexpr const char* kOutputNames[] = {"Y", "A", "loss", "dX", "dW_Q", "dW_K", "dW_V", "dW_O"};

// One run's output files, written into a staging folder beside --out (the same file system, so
// every move is a rename) and moved into --out by commit() once all of them are complete. A
// failure before or during commit() leaves --out as it was; the destructor removes the staging.
class StagedOutput {
 public:
  /// Creates the missing parents of `out_dir` and the staging folder; throws IoError.
  explicit StagedOutput(const std::string& out_dir) : out_dir_(out_dir) {
    std::error_code ec;
    out_ = fs::absolute(fs::path(out_dir), ec).lexically_normal();
    if (out_.filename().empty() && out_.has_relative_path()) out_ = out_.parent_path();  // "a/b/"
    if (ec || (fs::exists(out_, ec) && !fs::is_directory(out_, ec)))
      throw IoError(out_dir + ": cannot create the output folder" +
                    (ec ? ": " + ec.message() : ": a file of that name exists"));
    out_existed_ = fs::is_directory(out_, ec);
    if (out_existed_) {
      out_ = fs::canonical(out_, ec);  // through a symlink: stage beside the target
      if (ec) throw IoError(out_dir + ": cannot resolve the output folder: " + ec.message());
    }
    for (fs::path p = out_.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      made_parents_.push_back(p);  // deepest first: the order to remove them in
      if (p == p.parent_path()) break;
    }
    fs::create_directories(out_.parent_path(), ec);
    if (ec) throw IoError(out_dir + ": cannot create the output folder: " + ec.message());
    make_stage();
  }
  ~StagedOutput() {
    std::error_code ec;
    if (!stage_.empty()) fs::remove_all(stage_, ec);
    if (!committed_)
      for (const fs::path& p : made_parents_) fs::remove(p, ec);  // only removes empty ones
  }
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  fs::path staged(const std::string& file) const { return stage_ / file; }

  /// Moves the staged `files` into --out and removes the other outputs of an earlier run; on a
  /// failure puts back what it had moved and throws IoError, --out as it was.
  void commit(const std::vector<std::string>& files) {
    std::error_code ec;
    if (!out_existed_) {  // a new folder: one rename publishes the whole set
      fs::rename(stage_, out_, ec);
      if (ec) throw IoError(out_dir_ + ": cannot create the output folder: " + ec.message());
      stage_.clear();
      committed_ = true;
      return;
    }
    struct Change {
      fs::path target, backup;  // backup: a link to the old file, empty when there was none
      bool replace;             // true: the new file goes here, false: the old one goes away
    };
    std::vector<Change> changes;
    for (const char* name : kOutputNames) {
      const std::string file = std::string(name) + ".npy";
      Change c{out_ / file, {}, std::find(files.begin(), files.end(), file) != files.end()};
      const fs::file_status old = fs::symlink_status(c.target, ec);
      const bool old_file = fs::exists(old) && !fs::is_directory(old);
      if (!c.replace && !old_file) continue;  // nothing to remove (a folder is not our output)
      if (old_file) c.backup = backup(c.target, file);
      changes.push_back(std::move(c));
    }
    std::size_t done = 0;
    for (; done < changes.size(); ++done) {
      const Change& c = changes[done];
      if (c.replace)
        fs::rename(staged(c.target.filename().string()), c.target, ec);
      else
        fs::remove(c.target, ec);
      if (ec) break;
    }
    if (done == changes.size()) {
      committed_ = true;
      return;
    }
    const std::string why = ec.message();
    for (std::size_t k = done; k-- > 0;) {
      if (changes[k].backup.empty())
        fs::remove(changes[k].target, ec);
      else
        fs::rename(changes[k].backup, changes[k].target, ec);
    }
    throw IoError(changes[done].target.string() + ": cannot " +
                  (changes[done].replace ? "replace" : "remove") + " it (" + why + "); " +
                  out_dir_ + " is left as it was");
  }

 private:
  // A fresh folder named after --out with a unique suffix; mkdir's permissions (not mkdtemp's
  // 0700), since a new --out is this very folder renamed.
  void make_stage() {
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    std::error_code ec;
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name(".");  // appended piecewise: GCC 12 warns (-Wrestrict) on "." + a + b
      name.append(out_.filename().string()).append(".tapegrad-");
      name.append(std::to_string(::getpid())).append("-").append(std::to_string(tick + attempt));
      const fs::path p = out_.parent_path() / name;
      if (fs::create_directory(p, ec)) {
        stage_ = p;
        return;
      }
      if (ec)
        throw IoError(out_dir_ + ": cannot create a staging folder beside it: " + ec.message());
    }
    throw IoError(out_dir_ + ": cannot create a staging folder beside it");
  }

  // Keeps the old file's bytes in the staging folder for a rollback: a hard link (no copy, and
  // --out keeps the file meanwhile), else a copy. Throws IoError.
  fs::path backup(const fs::path& target, const std::string& file) {
    const fs::path b = stage_ / ("previous." + file);
    std::error_code ec;
    fs::create_hard_link(target, b, ec);
    if (ec) fs::copy_file(target, b, ec);
    if (ec) throw IoError(target.string() + ": cannot keep a copy to restore: " + ec.message());
    return b;
  }

  std::string out_dir_;   // as the user wrote it, for messages
  fs::path out_, stage_;  // stage_ empty once removed or renamed to out_
  bool out_existed_ = false;
  bool committed_ = false;
  std::vector<fs::path> made_parents_;
};

}  // namespace

void run_attention(const AttentionArgs& args) {
  const auto files = compute(args);
  StagedOutput out(args.out_dir);
  std::vector<std::string> names;
  for (const auto& [name, t] : files) {
    names.push_back(name + ".npy");
    write_npy(out.staged(names.back()).string(), t);
  }
  out.commit(names);
}

}  // namespace tg
