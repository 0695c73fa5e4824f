// The ops with PyTorch's axis arguments against PyTorch itself (tests/ops_reference.py):
// softmax / log_softmax over any dim, transpose of any two dims, sum / mean over several dims
// with keepdim, cross_entropy on (..., V) logits with ignore_index, class weights and label
// smoothing. For every case the float64 output and the gradient of sum(y * w), w fixed random
// weights, agree to 1e-12 relative. The convolution and pooling ops take several inputs (X, W,
// b) and also check the second derivative (through create_graph) and the float32 forward.
// Without python3, numpy and torch the suite skips, or fails when the environment variable CI is
// set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/io/npy.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using tg::Tensor;

struct TorchCase {
  std::string spec;  // "<op> key=value ...", as ops_reference.py reads it
  tg::Shape shape;   // of x
  std::function<Tensor(const Tensor&)> op;
  Tensor targets{}, weight{};  // cross_entropy only
};

// Relative to the array's largest magnitude: entries near zero are judged at its scale.
double max_rel_diff(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  const auto a = got.to_vector(), b = want.to_vector();
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    diff = std::max(diff, std::abs(a[i] - b[i]));
  }
  return diff / std::max(scale, 1e-300);
}

std::vector<TorchCase> cases() {
  std::vector<TorchCase> c;
  for (const char* name : {"softmax", "log_softmax"}) {
    const bool log = name[0] == 'l';
    const std::vector<std::pair<tg::Shape, int>> dims = {
        {{5}, 0},          {{1, 5}, 0},          {{1, 5}, -1},         {{5, 1}, 0},
        {{3, 5}, 0},       {{3, 5}, -1},         {{2, 3, 4}, 0},       {{2, 3, 4}, 1},
        {{2, 3, 4}, -1},   {{2, 3, 4}, -3},      {{2, 3, 2, 4}, 1},    {{2, 3, 2, 4}, -2},
        {{2, 1, 3, 4}, 3}, {{2, 3, 1, 4}, -4}};
    for (const auto& [s, d] : dims)
      c.push_back({std::string(name) + " dim=" + std::to_string(d), s, [log, d = d](const Tensor& x) {
                     return log ? tg::log_softmax(x, d) : tg::softmax(x, d);
                   }});
  }
  const std::vector<std::tuple<tg::Shape, int, int>> pairs = {
      {{3, 4}, 0, 1},     {{3, 4}, -1, -2},     {{1, 5}, 0, 1},     {{5, 1}, 1, 0},
      {{4}, 0, -1},       {{2, 3, 4}, 0, 1},    {{2, 3, 4}, 0, 2},  {{2, 3, 4}, -1, -2},
      {{2, 3, 4, 5}, 1, 3}, {{2, 3, 4, 5}, -4, -1}, {{2, 3, 4, 5}, 2, 3}, {{2, 3, 4, 5}, 1, 1}};
  for (const auto& [s, a, b] : pairs)
    c.push_back({"transpose dim0=" + std::to_string(a) + " dim1=" + std::to_string(b), s,
                 [a = a, b = b](const Tensor& x) { return tg::transpose(x, a, b); }});
  const std::vector<std::tuple<tg::Shape, std::vector<int>, bool>> reductions = {
      {{3, 4}, {0, 1}, false},      {{3, 4}, {1, 0}, true},        {{1, 5}, {0, -1}, true},
      {{5, 1}, {0}, false},         {{3, 4}, {}, false},           {{2, 3, 4}, {0, 2}, false},
      {{2, 3, 4}, {-1, -2}, true},  {{2, 3, 4}, {2, 0, 1}, true},  {{2, 3, 4, 5}, {1, 3}, false},
      {{2, 3, 4, 5}, {0, -2, -1}, true}, {{2, 3, 4, 5}, {-4, -3, -2, -1}, false}};
  for (const char* name : {"sum", "mean"}) {
    const bool is_mean = name[1] == 'e';
    for (const auto& [s, dims, keep] : reductions) {
      std::string list;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (i) list += ",";
        list += std::to_string(dims[i]);
      }
      c.push_back({std::string(name) + " dims=" + list + " keepdim=" + (keep ? "1" : "0"), s,
                   [is_mean, dims = dims, keep = keep](const Tensor& x) {
                     return is_mean ? tg::mean(x, dims, keep) : tg::sum(x, dims, keep);
                   }});
    }
  }
  // cross_entropy: (B, T, V) and (N, V), ignored targets, weights, smoothing and all together.
  struct Ce {
    tg::Shape shape;
    std::vector<int64_t> targets;
    tg::Shape target_shape;
    std::vector<double> weight;
    int64_t ignore_index;
    double label_smoothing;
  };
  const std::vector<Ce> ce = {
      {{4, 5}, {1, 0, 4, 2}, {4}, {}, -100, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {}, -100, 0.0},
      {{2, 3, 5}, {1, -100, 4, 2, -100, 3}, {2, 3}, {}, -100, 0.0},
      {{2, 3, 5}, {1, -1, 4, 2, -1, 3}, {2, 3}, {}, -1, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -100, 0.0},
      {{2, 3, 5}, {1, -1, 4, 4, -1, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -1, 0.0},
      {{2, 3, 5}, {1, 0, 4, 2, 2, 3}, {2, 3}, {}, -100, 0.1},
      {{2, 3, 5}, {1, -1, 4, 2, -1, 3}, {2, 3}, {}, -1, 0.3},
      {{2, 3, 5}, {1, -1, 4, 4, -1, 3}, {2, 3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -1, 0.2},
      {{4, 5}, {2, 4, 2, 0}, {4}, {0.5, 2.0, 1.0, 0.25, 3.0}, 2, 0.15},
      {{3, 5}, {2, 4, 0}, {3}, {0.5, 2.0, 1.0, 0.25, 3.0}, -100, 1.0},
      {{2, 1, 2, 3}, {2, 0, -100, 1}, {2, 1, 2}, {1.5, 0.2, 1.0}, -100, 0.05},
      {{1, 7}, {6}, {1}, {}, -100, 0.0},
      {{6}, {3}, {}, {}, -100, 0.4},
  };
  for (const Ce& e : ce) {
    tg::CrossEntropyOptions o;
    o.ignore_index = e.ignore_index;
    o.label_smoothing = e.label_smoothing;
    if (!e.weight.empty())
      o.weight = tg::from_vector(e.weight, {static_cast<int64_t>(e.weight.size())}).to(tg::Dtype::f64);
    const Tensor t = tg::from_indices(e.targets, e.target_shape);
    c.push_back({"cross_entropy ignore_index=" + std::to_string(e.ignore_index) +
                     " label_smoothing=" + std::to_string(e.label_smoothing),
                 e.shape, [t, o](const Tensor& x) { return tg::cross_entropy(x, t, o); }, t,
                 o.weight});
  }
  return c;
}

TEST(OpsTorch, MatchPyTorchInFloat64) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const tg::test::TempDir tmp;
  const std::vector<TorchCase> all = cases();
  std::string list;
  tg::Rng rng(2026);
  std::vector<Tensor> xs, ys, dxs;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TorchCase& c = all[i];
    const fs::path d = tmp / std::to_string(i);
    fs::create_directories(d);
    const Tensor x = tg::randn(c.shape, rng, tg::Dtype::f64, 2.0).set_requires_grad();
    const Tensor y = c.op(x);
    const Tensor w = tg::randn(y.shape(), rng, tg::Dtype::f64);
    tg::sum(tg::mul(y, w)).backward();
    tg::write_npy((d / "x.npy").string(), x.detach());
    tg::write_npy((d / "w.npy").string(), w);
    if (c.targets.defined()) tg::write_npy((d / "targets.npy").string(), c.targets);
    if (c.weight.defined()) tg::write_npy((d / "weight.npy").string(), c.weight);
    list += std::to_string(i) + " " + c.spec + "\n";
    ys.push_back(y.detach());
    dxs.push_back(x.grad());
  }
  {
    std::FILE* f = std::fopen(tmp.file("cases.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(list.c_str(), f);
    std::fclose(f);
  }
  const std::string command = tg::test::kPython + " " + TAPEGRAD_OPS_REFERENCE_PY + " --dir " +
                              tmp.path().string() + " > " + tmp.file("log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(std::to_string(i) + " " + all[i].spec + " on " + all[i].shape.str());
    const fs::path d = tmp / std::to_string(i);
    EXPECT_LE(max_rel_diff(ys[i], tg::read_npy((d / "y.npy").string())), 1e-12);
    EXPECT_LE(max_rel_diff(dxs[i], tg::read_npy((d / "dx.npy").string())), 1e-12);
  }
}

// Convolution and pooling: several inputs, each compared with PyTorch in its output, its
// gradient of sum(y * w), the gradient of sum_i <grad_i, v_i> (the second derivative, through
// create_graph) and the float32 forward.
struct MultiCase {
  std::string spec;  // "<op> key=value ...": the arguments as ops_reference.py passes them
  std::vector<tg::Shape> shapes;  // of the inputs
  std::function<Tensor(const std::vector<Tensor>&)> op;
  bool ties = false;  // inputs rounded to halves: max pooling meets equal entries
};

std::string pair(tg::Int2 v) { return std::to_string(v.h) + "," + std::to_string(v.w); }

std::vector<MultiCase> conv_cases() {
  std::vector<MultiCase> c;
  struct Conv {
    tg::Shape x, w;
    bool bias;
    tg::Int2 stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Conv> conv2d = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, true, 1, 0, 1, 1},
      {{1, 2, 5, 5}, {3, 2, 1, 1}, false, 1, 0, 1, 1},
      {{2, 2, 7, 6}, {3, 2, 1, 1}, true, 2, 1, 1, 1},
      {{1, 2, 8, 7}, {2, 2, 3, 2}, true, {2, 1}, {1, 0}, {1, 2}, 1},
      {{2, 4, 5, 5}, {6, 2, 2, 3}, true, 1, {0, 1}, 1, 2},
      {{1, 3, 6, 6}, {3, 1, 3, 3}, true, 2, 1, 1, 3},
      {{2, 3, 5, 4}, {6, 1, 3, 2}, false, {1, 2}, 2, {2, 1}, 3},
      {{1, 1, 7, 5}, {2, 1, 3, 3}, true, 3, 2, 1, 1},
      {{1, 2, 3, 3}, {2, 2, 5, 5}, true, 1, 1, 1, 1},
  };
  for (const Conv& k : conv2d) {
    std::vector<tg::Shape> shapes{k.x, k.w};
    if (k.bias) shapes.push_back({k.w[0]});
    c.push_back({"conv2d stride=" + pair(k.stride) + " padding=" + pair(k.padding) +
                     " dilation=" + pair(k.dilation) + " groups=" + std::to_string(k.groups),
                 shapes, [k](const std::vector<Tensor>& in) {
                   return tg::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), k.stride,
                                     k.padding, k.dilation, k.groups);
                 }});
  }
  struct Conv1 {
    tg::Shape x, w;
    bool bias;
    int64_t stride, padding, dilation, groups;
  };
  const std::vector<Conv1> conv1d = {
      {{2, 3, 9}, {4, 3, 3}, true, 1, 0, 1, 1},     {{1, 2, 6}, {3, 2, 1}, false, 1, 0, 1, 1},
      {{2, 2, 11}, {3, 2, 3}, true, 2, 1, 2, 1},    {{2, 4, 7}, {2, 2, 2}, true, 1, 1, 1, 2},
      {{1, 3, 8}, {6, 1, 3}, true, 3, 2, 1, 3},
  };
  for (const Conv1& k : conv1d) {
    std::vector<tg::Shape> shapes{k.x, k.w};
    if (k.bias) shapes.push_back({k.w[0]});
    c.push_back({"conv1d stride=" + std::to_string(k.stride) + " padding=" +
                     std::to_string(k.padding) + " dilation=" + std::to_string(k.dilation) +
                     " groups=" + std::to_string(k.groups),
                 shapes, [k](const std::vector<Tensor>& in) {
                   return tg::conv1d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), k.stride,
                                     k.padding, k.dilation, k.groups);
                 }});
  }
  struct Pool {
    tg::Shape x;
    tg::Int2 kernel, stride, padding;
    bool ties;
  };
  const std::vector<Pool> pool2d = {
      {{2, 2, 4, 4}, 2, 2, 0, false},          {{1, 2, 5, 5}, 3, 2, 1, false},
      {{1, 1, 4, 7}, {2, 3}, {1, 2}, {1, 1}, false}, {{2, 1, 5, 7}, 2, 2, 0, false},
      {{2, 3, 6, 6}, 2, 2, 0, true},           {{1, 2, 6, 5}, 3, 1, 1, true},
  };
  for (const char* name : {"max_pool2d", "avg_pool2d"})
    for (const Pool& k : pool2d) {
      const bool is_max = name[0] == 'm';
      c.push_back({std::string(name) + " kernel=" + pair(k.kernel) + " stride=" + pair(k.stride) +
                       " padding=" + pair(k.padding),
                   {k.x}, [k, is_max](const std::vector<Tensor>& in) {
                     return is_max ? tg::max_pool2d(in[0], k.kernel, k.stride, k.padding)
                                   : tg::avg_pool2d(in[0], k.kernel, k.stride, k.padding);
                   },
                   k.ties});
    }
  struct Pool1 {
    tg::Shape x;
    int64_t kernel, stride, padding;
    bool ties;
  };
  const std::vector<Pool1> pool1d = {
      {{2, 3, 8}, 2, 2, 0, false}, {{1, 2, 9}, 3, 2, 1, false}, {{2, 1, 7}, 2, 3, 0, false},
      {{2, 2, 10}, 3, 1, 1, true}};
  for (const char* name : {"max_pool1d", "avg_pool1d"})
    for (const Pool1& k : pool1d) {
      const bool is_max = name[0] == 'm';
      c.push_back({std::string(name) + " kernel=" + std::to_string(k.kernel) + " stride=" +
                       std::to_string(k.stride) + " padding=" + std::to_string(k.padding),
                   {k.x}, [k, is_max](const std::vector<Tensor>& in) {
                     return is_max ? tg::max_pool1d(in[0], k.kernel, k.stride, k.padding)
                                   : tg::avg_pool1d(in[0], k.kernel, k.stride, k.padding);
                   },
                   k.ties});
    }
  return c;
}

TEST(OpsTorch, ConvAndPoolMatchPyTorch) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const tg::test::TempDir tmp;
  const std::vector<MultiCase> all = conv_cases();
  std::string list;
  tg::Rng rng(2027);
  struct Result {
    Tensor y, y32;
    std::vector<Tensor> d, dd;
  };
  std::vector<Result> res;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const MultiCase& c = all[i];
    const fs::path d = tmp / std::to_string(i);
    fs::create_directories(d);
    std::vector<Tensor> xs, vs;
    for (std::size_t k = 0; k < c.shapes.size(); ++k) {
      Tensor x = tg::randn(c.shapes[k], rng, tg::Dtype::f64, 2.0);
      if (c.ties) x = tg::from_vector([&] {  // halves in [-2, 2]: many equal entries
            auto v = x.to_vector();
            for (double& e : v) e = std::round(std::clamp(e, -2.0, 2.0) * 2) / 2;
            return v;
          }(), x.shape(), tg::Dtype::f64);
      xs.push_back(x.set_requires_grad());
      tg::write_npy((d / ("in" + std::to_string(k) + ".npy")).string(), x.detach());
    }
    Result r;
    const Tensor y = c.op(xs);
    const Tensor w = tg::randn(y.shape(), rng, tg::Dtype::f64);
    r.d = tg::grad({tg::sum(tg::mul(y, w))}, xs, {}, /*create_graph=*/true);
    Tensor s;  // sum_k <d_k, v_k>
    for (std::size_t k = 0; k < xs.size(); ++k) {
      vs.push_back(tg::randn(xs[k].shape(), rng, tg::Dtype::f64));
      const Tensor t = tg::sum(tg::mul(r.d[k], vs[k]));
      s = s.defined() ? tg::add(s, t) : t;
      tg::write_npy((d / ("v" + std::to_string(k) + ".npy")).string(), vs[k]);
    }
    r.dd = s.requires_grad() ? tg::grad({s}, xs) : std::vector<Tensor>{};
    for (Tensor& g : r.d) g = g.detach();
    std::vector<Tensor> x32;
    for (const Tensor& x : xs) x32.push_back(x.detach().to(tg::Dtype::f32));
    r.y = y.detach();
    r.y32 = c.op(x32);
    tg::write_npy((d / "w.npy").string(), w);
    list += std::to_string(i) + " " + c.spec + " inputs=" + std::to_string(xs.size()) + "\n";
    res.push_back(r);
  }
  {
    std::FILE* f = std::fopen(tmp.file("cases.txt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(list.c_str(), f);
    std::fclose(f);
  }
  const std::string command = tg::test::kPython + " " + TAPEGRAD_OPS_REFERENCE_PY + " --dir " +
                              tmp.path().string() + " > " + tmp.file("log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(std::to_string(i) + " " + all[i].spec);
    const fs::path d = tmp / std::to_string(i);
    const Result& r = res[i];
    EXPECT_LE(max_rel_diff(r.y, tg::read_npy((d / "y.npy").string())), 1e-12);
    ASSERT_EQ(r.y32.dtype(), tg::Dtype::f32);
    EXPECT_LE(max_rel_diff(r.y32.to(tg::Dtype::f64), tg::read_npy((d / "y32.npy").string())), 1e-5);
    for (std::size_t k = 0; k < r.d.size(); ++k) {
      SCOPED_TRACE("input " + std::to_string(k));
      EXPECT_LE(max_rel_diff(r.d[k], tg::read_npy((d / ("d" + std::to_string(k) + ".npy")).string())), 1e-12);
      const Tensor want = tg::read_npy((d / ("dd" + std::to_string(k) + ".npy")).string());
      const Tensor got = r.dd.empty() ? tg::zeros(want.shape(), tg::Dtype::f64) : r.dd[k];
      EXPECT_LE(max_rel_diff(got, want), 1e-12);
    }
  }
}

}  // namespace
