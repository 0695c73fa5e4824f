#pragma once
// What the suites comparing ops with PyTorch share (tests/ops_torch*_test.cpp, PyTorch's side in
// tests/ops_reference.py): the comparison of two arrays, and the runner of cases of several
// inputs, which checks each case's float64 output, the gradient of sum(y * w) for every input
// (twice: by the ops' kernels, a plain backward, and by their formulas, through create_graph),
// the second derivative (the gradient of sum_k <d_k, v_k>, through create_graph), the float32
// forward and, for the ops that return indices, those indices. A missing torch is a failure.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"
#include "torch_util.h"

namespace tg::test {

// Relative to the array's largest finite magnitude: entries near zero are judged at its scale;
// inf and NaN entries must be the same inf or both NaN.
inline double max_rel_diff(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  const auto a = got.to_vector(), b = want.to_vector();
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return INFINITY;
      continue;
    }
    scale = std::max(scale, std::abs(b[i]));
    diff = std::max(diff, std::abs(a[i] - b[i]));
  }
  return diff / std::max(scale, 1e-300);
}

// One case of the runner below.
struct MultiCase {
  std::string spec;  // "<op> key=value ...": the arguments as ops_reference.py passes them
  std::vector<Shape> shapes;  // of the inputs, drawn from N(0, 2) (unless given)
  std::function<Tensor(const std::vector<Tensor>&)> op;
  bool ties = false;  // inputs rounded to halves: max pooling and max meet equal entries
  std::vector<Tensor> given{};  // float64 inputs to use instead of draws (inf, NaN, ties)
  Tensor index{};  // an int64 argument (gather's index), written as index.npy
  // For the ops that also return indices (max, argmax ...): those, compared with PyTorch's.
  std::function<Tensor(const std::vector<Tensor>&)> indices{};
};

// "d3.npy": a numbered file of a case (built piece by piece: GCC 12 warns falsely, -Wrestrict,
// on a chain of + starting from a literal).
inline std::string numbered(const char* stem, std::size_t k) {
  std::string name = stem;
  name += std::to_string(k);
  name += ".npy";
  return name;
}

inline void write_cases(const std::filesystem::path& file, const std::string& list) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(list.c_str(), f);
  std::fclose(f);
}

// Runs every case here and in PyTorch (ops_reference.py at `script`) and compares them: the
// float64 output, gradients and second derivatives to 1e-12 relative, the float32 forward to 1e-5,
// indices exactly.
inline void run_multi_cases(const std::vector<MultiCase>& all, uint64_t seed, const std::string& script) {
  ASSERT_EQ(python_missing("numpy, torch"), "");
  namespace fs = std::filesystem;
  const TempDir tmp;
  std::string list;
  Rng rng(seed);
  struct Result {
    Tensor y, y32, idx;
    std::vector<Tensor> d, dd, d_kernel;
  };
  std::vector<Result> res;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const MultiCase& c = all[i];
    const fs::path d = tmp / std::to_string(i);
    fs::create_directories(d);
    std::vector<Tensor> xs, vs;
    for (std::size_t k = 0; k < std::max(c.shapes.size(), c.given.size()); ++k) {
      Tensor x = k < c.given.size() ? c.given[k].detach().clone()
                                    : randn(c.shapes[k], rng, Dtype::f64, 2.0);
      if (c.ties) x = from_vector([&] {  // halves in [-2, 2]: many equal entries
            auto v = x.to_vector();
            for (double& e : v) e = std::round(std::clamp(e, -2.0, 2.0) * 2) / 2;
            return v;
          }(), x.shape(), Dtype::f64);
      xs.push_back(x.set_requires_grad());
      write_npy((d / numbered("in", k)).string(), x.detach());
    }
    if (c.index.defined()) write_npy((d / "index.npy").string(), c.index);
    Result r;
    const Tensor y = c.op(xs);
    const Tensor w = randn(y.shape(), rng, Dtype::f64);
    const Tensor L = sum(mul(y, w));
    r.d_kernel = grad({L}, xs, {}, /*create_graph=*/false, /*retain_graph=*/true);
    r.d = grad({L}, xs, {}, /*create_graph=*/true);
    Tensor s;  // sum_k <d_k, v_k>
    for (std::size_t k = 0; k < xs.size(); ++k) {
      vs.push_back(randn(xs[k].shape(), rng, Dtype::f64));
      const Tensor t = sum(mul(r.d[k], vs[k]));
      s = s.defined() ? add(s, t) : t;
      write_npy((d / numbered("v", k)).string(), vs[k]);
    }
    r.dd = s.requires_grad() ? grad({s}, xs, {}, false, false) : std::vector<Tensor>{};
    for (Tensor& g : r.d) g = g.detach();
    std::vector<Tensor> x32;
    for (const Tensor& x : xs) x32.push_back(x.detach().to(Dtype::f32));
    r.y = y.detach();
    r.y32 = c.op(x32);
    if (c.indices) r.idx = c.indices(xs);
    write_npy((d / "w.npy").string(), w);
    list += std::to_string(i);  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on a chain of +
    list += " " + c.spec;
    list += " inputs=" + std::to_string(xs.size()) + "\n";
    res.push_back(r);
  }
  write_cases(tmp / "cases.txt", list);
  const std::string command = kPython + " " + script + " --dir " + tmp.path().string() + " > " +
                              tmp.file("log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(tmp / "log");
  std::string agreement;  // one line a case: "op,forward,gradient,second,forward32"
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(all[i].spec + " (case " + std::to_string(i) + ")");
    const fs::path d = tmp / std::to_string(i);
    const Result& r = res[i];
    const double forward = max_rel_diff(r.y, read_npy((d / "y.npy").string()));
    EXPECT_LE(forward, 1e-12);
    ASSERT_EQ(r.y32.dtype(), Dtype::f32);
    const double forward32 = max_rel_diff(r.y32.to(Dtype::f64), read_npy((d / "y32.npy").string()));
    EXPECT_LE(forward32, 1e-5);
    double gradient = 0, second = 0;
    if (r.idx.defined()) {
      const Tensor want = read_npy((d / "idx.npy").string(), NpyAccept::floats_and_ints);
      EXPECT_EQ(r.idx.dtype(), Dtype::i64);
      EXPECT_EQ(r.idx.shape(), want.shape());
      EXPECT_EQ(r.idx.to_vector(), want.to_vector());
    }
    for (std::size_t k = 0; k < r.d.size(); ++k) {
      SCOPED_TRACE("input " + std::to_string(k));
      const Tensor want_d = read_npy((d / numbered("d", k)).string());
      const double formula = max_rel_diff(r.d[k], want_d);
      const double kernel = max_rel_diff(r.d_kernel[k], want_d);
      EXPECT_LE(formula, 1e-12) << "the formula's gradient";
      EXPECT_LE(kernel, 1e-12) << "the kernel's gradient";
      const Tensor want = read_npy((d / numbered("dd", k)).string());
      const Tensor got = r.dd.empty() ? zeros(want.shape(), Dtype::f64) : r.dd[k];
      const double dd = max_rel_diff(got, want);
      EXPECT_LE(dd, 1e-12);
      gradient = std::max({gradient, formula, kernel});
      second = std::max(second, dd);
    }
    char row[160];
    std::snprintf(row, sizeof row, "%s,%.3g,%.3g,%.3g,%.3g\n",
                  all[i].spec.substr(0, all[i].spec.find(' ')).c_str(), forward, gradient, second,
                  forward32);
    if (forward <= 1e-12 && forward32 <= 1e-5 && gradient <= 1e-12 && second <= 1e-12)
      agreement += row;  // (a negative control's cases, which must disagree, are left out)
  }
  // TAPEGRAD_AGREEMENT_CSV names a file the differences are appended to, for the agreement
  // table of docs/TESTING.md (tests/agreement_table.py).
  if (const char* path = std::getenv("TAPEGRAD_AGREEMENT_CSV"); path != nullptr && *path) {
    std::FILE* f = std::fopen(path, "a");
    ASSERT_NE(f, nullptr) << path;
    std::fputs(agreement.c_str(), f);
    std::fclose(f);
  }
}

}  // namespace tg::test
