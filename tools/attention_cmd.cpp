// `tapegrad attention`: causal self-attention on .npy inputs, with the gradient of every input.
//
//   read:     X (T, D) or (B, T, D), W_Q, W_K (D, d_k), W_V (D, d_v), [W_O (d_v, d_v)]
//   compute:  Y = attention(X; W), A its weights, L = 0.5 * sum(Y^2), then backward
//   write:    Y, A, loss, dX, dW_Q, dW_K, dW_V, [dW_O]
//
// Everything that can fail on the inputs (reading, values, shapes, the computation itself) runs
// before the first file is written; if a write fails, what this run wrote is removed again, so
// the output folder holds all the outputs or none of them.

#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ops/reshape.h"
#include "tools/commands.h"
#include "io/npy.h"

namespace tg {

namespace {

namespace fs = std::filesystem;

// "(2, 3)" from a flat row-major index, for messages.
std::string index_str(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  std::string r = "(";
  for (int d = 0; d < s.rank(); ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + (s.rank() == 1 ? ",)" : ")");
}

// Throws ValueError naming `what` at the first NaN or inf of t; `why` ends the message.
void require_finite(const Tensor& t, const std::string& what, const std::string& why) {
  const std::vector<double> v = t.to_vector();
  for (std::size_t k = 0; k < v.size(); ++k)
    if (!std::isfinite(v[k]))
      throw ValueError(what + ": non-finite value " + std::to_string(v[k]) + " at index " +
                       index_str(static_cast<int64_t>(k), t.shape()) + why);
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

  AttentionOptions o = args.options;
  o.need_weights = true;  // A.npy: the composed ops, which keep the weights
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
  const std::vector<double> a = out.A.to_vector();
  const int64_t T = out.A.size(-1);
  for (std::size_t r = 0; r * T < a.size(); ++r) {
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) sum += a[r * T + j];
    if (!(sum > 0.5))
      throw ValueError("A: row " + std::to_string(r) + " of the attention weights is all zero" +
                       hint);
  }
  const Tensor L = attention_loss(out.Y);  // 0.5 * sum(Y^2)
  L.backward();

  // A: (T, T) for a 2-D X and one head, else (H, T, T) or (B, H, T, T); one head over a 3-D X
  // computes (B, T, T), written as (B, 1, T, T).
  Tensor A = out.A.detach();
  if (o.heads == 1 && X.rank() == 3) A = reshape(A, {X.size(0), 1, X.size(1), X.size(1)});
  auto grad_of = [](const Tensor& leaf) {
    return leaf.grad().defined() ? leaf.grad() : zeros(leaf.shape(), leaf.dtype());
  };
  std::vector<std::pair<std::string, Tensor>> files = {
      {"Y", out.Y.detach()}, {"A", A},
      {"loss", L.detach()},  {"dX", grad_of(X)},
      {"dW_Q", grad_of(W_Q)}, {"dW_K", grad_of(W_K)},
      {"dW_V", grad_of(W_V)}};
  if (W_O.defined()) files.emplace_back("dW_O", grad_of(W_O));

  for (const auto& [name, t] : files) require_finite(t, name, hint);
  return files;
}

}  // namespace

void run_attention(const AttentionArgs& args) {
  const auto files = compute(args);

  const fs::path out(args.out_dir);
  std::error_code ec;
  const bool existed = fs::exists(out, ec);
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out, ec))
    throw IoError(args.out_dir + ": cannot create the output folder" +
                  (ec ? ": " + ec.message() : ": a file of that name exists"));

  std::vector<fs::path> written;
  try {
    for (const auto& [name, t] : files) {
      const fs::path path = out / (name + ".npy");
      write_npy(path.string(), t);  // atomic: the file is complete or absent
      written.push_back(path);
    }
  } catch (...) {
    for (const fs::path& p : written) fs::remove(p, ec);
    if (!existed) fs::remove(out, ec);  // only when empty, so nothing else is lost
    throw;
  }
}

}  // namespace tg
