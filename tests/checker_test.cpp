// The attention-invariant checker: it passes the library's models and correct hand-built
// variants, and flags exactly the broken invariants of deliberately wrong variants built from
// tg ops.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/check/checker.h>
#include <tapegrad/ops/ops.h>

namespace {

using tg::AttentionOptions;
using tg::AttentionOutput;
using tg::InvariantReport;
using tg::Tensor;

// X (B, T, D) or (T, D), then W_Q, W_K (D, d_k), W_V (D, d_v) and, when w_o, W_O (d_v, d_v).
std::vector<Tensor> make_inputs(int64_t B, int64_t T, int64_t D, int64_t d_k, int64_t d_v,
                                bool w_o, uint64_t seed = 21) {
  tg::Rng rng(seed);
  std::vector<Tensor> in{B ? tg::randn({B, T, D}, rng) : tg::randn({T, D}, rng)};
  for (int64_t cols : {d_k, d_k, d_v})
    in.push_back(tg::randn({D, cols}, rng, tg::Dtype::f64, 0.5));
  if (w_o) in.push_back(tg::randn({d_v, d_v}, rng, tg::Dtype::f64, 0.5));
  return in;
}

tg::AttentionFn library_model(AttentionOptions o) {
  o.need_weights = true;  // the checker reads A
  return [o](const Tensor& X, const std::vector<Tensor>& p) {
    const Tensor W_O = p.size() > 3 ? p[3] : Tensor();
    return o.heads == 1 ? tg::single_head_attention(X, p[0], p[1], p[2], W_O, o)
                        : tg::multi_head_attention(X, p[0], p[1], p[2], W_O, o);
  };
}

std::vector<std::string> expected_names(bool w_o, int64_t window, std::size_t params) {
  std::vector<std::string> n{"shapes", "rows of A sum to 1",
                             window ? "weights outside the causal window are 0"
                                    : "weights above the diagonal are 0",
                             w_o ? "Y[0] == V[0] W_O" : "Y[0] == V[0]",
                             "causality through autodiff", "gradcheck of dY/dX"};
  for (std::size_t k = 0; k < params; ++k)
    n.push_back("gradcheck of dY/dparameter " + std::to_string(k));
  return n;
}

void expect_all_pass(const InvariantReport& r, bool w_o, int64_t window, std::size_t params) {
  EXPECT_TRUE(r.passed()) << r.str();
  const auto names = expected_names(w_o, window, params);
  ASSERT_EQ(r.results.size(), names.size()) << r.str();
  for (std::size_t k = 0; k < names.size(); ++k) {
    EXPECT_EQ(r.results[k].name.rfind(names[k], 0), 0u) << r.results[k].name;
    EXPECT_TRUE(r.results[k].passed) << r.results[k].name << ": " << r.results[k].detail;
    EXPECT_FALSE(r.results[k].detail.empty()) << r.results[k].name;
  }
}

TEST(Checker, PassesLibraryModels) {
  struct Model {
    const char* name;
    int64_t B, d_k, d_v;
    AttentionOptions o;
    bool w_o;
    tg::Dtype dtype;
  };
  const Model models[] = {
      {"single_2d", 0, 4, 3, {}, false, tg::Dtype::f64},
      {"single_3d_wo", 2, 4, 4, {}, true, tg::Dtype::f64},
      {"single_window2_rope", 2, 4, 4, {.window = 2, .rope = true}, false, tg::Dtype::f64},
      {"multi_h2_rope_wo", 2, 4, 4, {.heads = 2, .rope = true}, true, tg::Dtype::f64},
      {"multi_h4_2d_window3_no_scale_wo", 0, 8, 4, {.heads = 4, .window = 3, .scale = false},
       true, tg::Dtype::f64},
      {"single_3d_wo_float32", 2, 4, 4, {.rope = true}, true, tg::Dtype::f32},
      {"multi_h2_window2_float32", 2, 4, 4, {.heads = 2, .window = 2}, true, tg::Dtype::f32},
  };
  for (const Model& m : models) {
    SCOPED_TRACE(m.name);
    auto in = make_inputs(m.B, 5, 3, m.d_k, m.d_v, m.w_o);
    for (Tensor& t : in) t = t.to(m.dtype);
    const std::vector<Tensor> params(in.begin() + 1, in.end());
    tg::CheckerOptions co;
    co.window = m.o.window;
    expect_all_pass(tg::check_attention(library_model(m.o), in[0], params, co), m.w_o,
                    m.o.window, params.size());
  }
}

TEST(Checker, PassesLayerWhoseParametersRequireGrad) {
  tg::Rng rng(4);
  const tg::nn::QKVAttention layer(3, 4, 4, {.heads = 2, .need_weights = true}, true, rng);
  const Tensor X = tg::randn({2, 4, 3}, rng);
  const auto f = [&layer](const Tensor& x, const std::vector<Tensor>& p) {
    return tg::multi_head_attention(x, p[0], p[1], p[2], p[3], layer.options);
  };
  expect_all_pass(tg::check_attention(f, X, layer.parameters()), true, 0, 4);
  EXPECT_FALSE(layer.W_Q.grad().defined()) << "the checker must not touch the layer's grads";
}

// A single-head (or, with heads > 1, nanoGPT-layout multi-head) attention assembled from tg ops,
// with hooks where the broken variants go wrong.
using MaskRule = std::function<bool(int64_t i, int64_t j)>;  // true: i sees j
using Unary = std::function<Tensor(const Tensor&)>;

bool causal(int64_t i, int64_t j) { return j <= i; }

struct Variant {
  const char* name = "";
  MaskRule visible = causal;  // null: no mask at all
  Unary scores = nullptr;     // applied to the scaled scores
  Unary weights = nullptr;    // S + M -> A; null: softmax
  std::function<Tensor(const Tensor& Y, const AttentionOutput&)> output = nullptr;  // null: Y W_O
  int64_t heads = 1;
  bool forget_permute = false;  // concatenates heads without moving T back in front
  bool w_o = false;
  int64_t window = 0;  // the window the checker is told
  std::vector<std::string> must_fail = {};  // substrings of exactly the failing invariants
};

Tensor loop_mask(int64_t T, tg::Dtype dtype, const MaskRule& visible) {
  std::vector<double> m(T * T);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      m[i * T + j] = visible(i, j) ? 0.0 : -std::numeric_limits<double>::infinity();
  return tg::from_vector(m, {T, T}, dtype);
}

AttentionOutput run_variant(const Variant& v, const Tensor& X, const std::vector<Tensor>& p) {
  const int64_t B = X.size(0), T = X.size(-2), H = v.heads, d_v = p[2].size(1);
  const auto split = [&](const Tensor& P) {  // (B, T, d) -> (B, H, T, d/H)
    return H == 1 ? P : tg::permute(tg::reshape(P, {B, T, H, P.size(-1) / H}), {0, 2, 1, 3});
  };
  AttentionOutput o;
  o.Q = split(tg::matmul(X, p[0]));
  o.K = split(tg::matmul(X, p[1]));
  o.V = split(tg::matmul(X, p[2]));
  Tensor S = tg::scale(tg::matmul(o.Q, o.K, false, true), 1.0 / std::sqrt(1.0 * o.Q.size(-1)));
  if (v.scores) S = v.scores(S);
  if (v.visible) S = tg::add_mask(S, loop_mask(T, S.dtype(), v.visible));
  o.A = v.weights ? v.weights(S) : tg::softmax(S);
  Tensor Y = tg::matmul(o.A, o.V);  // (.., T, d_v / H)
  if (H > 1) Y = tg::reshape(v.forget_permute ? Y : tg::permute(Y, {0, 2, 1, 3}), {B, T, d_v});
  if (p.size() > 3) o.W_O = p[3];
  o.Y = v.output ? v.output(Y, o) : o.W_O.defined() ? tg::matmul(Y, o.W_O) : Y;
  return o;
}

// S / 2 forward, but a backward that claims 0.6 dS.
Tensor bad_halve(const Tensor& S) {
  return tg::record("bad_halve", tg::scale(S.detach(), 0.5), {S}).formula([](const Tensor& dS) -> tg::Grads { return {tg::scale(dS, 0.6)}; });
}

// Keeps rows 0..T-2 of a (.., T, n) tensor: P (T-1, T) @ x.
Tensor drop_last_row(const Tensor& x) {
  const int64_t T = x.size(-2);
  std::vector<double> p((T - 1) * T, 0.0);
  for (int64_t i = 0; i + 1 < T; ++i) p[i * T + i] = 1;
  return tg::matmul(tg::from_vector(p, {T - 1, T}, x.dtype()), x);
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {.name = "control: single head"},
      {.name = "control: single head with W_O", .w_o = true},
      {.name = "control: two heads with W_O", .heads = 2, .w_o = true},
      {.name = "control: window 2",
       .visible = [](int64_t i, int64_t j) { return j <= i && j > i - 2; }, .window = 2},
      {.name = "mask off by one (j = i + 1 visible)",
       .visible = [](int64_t i, int64_t j) { return j <= i + 1; },
       .must_fail = {"above the diagonal", "Y[0]", "causality"}},
      {.name = "no mask", .visible = nullptr,
       .must_fail = {"above the diagonal", "Y[0]", "causality"}},
      {.name = "no mask, two heads", .visible = nullptr, .heads = 2,
       .must_fail = {"above the diagonal", "Y[0]", "causality"}},
      {.name = "softmax over the wrong axis",
       .weights = [](const Tensor& S) { return tg::transpose(tg::softmax(tg::transpose(S))); },
       .must_fail = {"sum to 1", "Y[0]", "causality"}},
      {.name = "window that leaks the future",
       .visible = [](int64_t i, int64_t j) { return j <= i + 1 && j > i - 2; }, .window = 2,
       .must_fail = {"outside the causal window", "Y[0]", "causality"}},
      {.name = "claims window 2, uses 3",
       .visible = [](int64_t i, int64_t j) { return j <= i && j > i - 3; }, .window = 2,
       .must_fail = {"outside the causal window", "causality"}},
      {.name = "control: uses window 3, claims 3",
       .visible = [](int64_t i, int64_t j) { return j <= i && j > i - 3; }, .window = 3},
      {.name = "Y shifted by 0.1",
       .output = [](const Tensor& Y, const AttentionOutput&) {
         return tg::add(Y, tg::scalar(0.1));
       },
       .must_fail = {"Y[0]"}},
      {.name = "W_O applied transposed",
       .output = [](const Tensor& Y, const AttentionOutput& o) {
         return tg::matmul(Y, o.W_O, false, true);
       },
       .w_o = true, .must_fail = {"Y[0] == V[0] W_O"}},
      {.name = "rows of A scaled by 0.9",
       .weights = [](const Tensor& S) { return tg::scale(tg::softmax(S), 0.9); },
       .must_fail = {"sum to 1", "Y[0]"}},
      {.name = "A drops its last row",
       .weights = [](const Tensor& S) { return drop_last_row(tg::softmax(S)); },
       .must_fail = {"shapes"}},
      {.name = "Y sums out the batch axis",
       .output = [](const Tensor& Y, const AttentionOutput&) { return tg::sum(Y, 0); },
       .must_fail = {"shapes"}},
      {.name = "Y mixes batch entries (rows >= 1 add the batch sum of V)",
       .output = [](const Tensor& Y, const AttentionOutput& o) {
         const Tensor c = tg::from_vector({0, 0.1, 0.1, 0.1, 0.1}, {5, 1});  // row 0 untouched
         return tg::add(Y, tg::mul(c, tg::sum(o.V, 0, true)));
       },
       .must_fail = {"causality"}},
      {.name = "heads concatenated without the permute", .heads = 2, .forget_permute = true,
       .must_fail = {"Y[0]", "causality"}},
      {.name = "scores through an op with a wrong backward", .scores = bad_halve,
       .must_fail = {"dY/dX", "dY/dparameter 0", "dY/dparameter 1"}},
  };
  return v;
}

InvariantReport check_variant(const Variant& v, bool gradients = true) {
  const auto in = make_inputs(2, 5, 3, 4, 4, v.w_o);
  tg::CheckerOptions co;
  co.window = v.window;
  co.check_gradients = gradients;
  return tg::check_attention([&v](const Tensor& X, const std::vector<Tensor>& p) {
    return run_variant(v, X, p);
  }, in[0], std::vector<Tensor>(in.begin() + 1, in.end()), co);
}

TEST(Checker, FlagsExactlyTheBrokenInvariants) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    const InvariantReport r = check_variant(v);
    EXPECT_EQ(r.passed(), v.must_fail.empty()) << r.str();
    for (const std::string& f : v.must_fail)
      EXPECT_TRUE(std::any_of(r.results.begin(), r.results.end(),
                              [&](const tg::InvariantResult& x) {
                                return x.name.find(f) != std::string::npos;
                              }))
          << "no invariant named like '" << f << "':\n" << r.str();
    for (const tg::InvariantResult& x : r.results) {
      const bool broken = std::any_of(v.must_fail.begin(), v.must_fail.end(),
                                      [&](const std::string& f) {
                                        return x.name.find(f) != std::string::npos;
                                      });
      EXPECT_EQ(x.passed, !broken) << x.name << ": " << x.detail;
    }
    if (v.must_fail.empty()) expect_all_pass(r, v.w_o, v.window, v.w_o ? 4 : 3);
  }
}

const tg::InvariantResult& find(const InvariantReport& r, const std::string& name) {
  for (const auto& x : r.results)
    if (x.name.find(name) != std::string::npos) return x;
  static const tg::InvariantResult none{"missing " + name, false, -1, ""};
  ADD_FAILURE() << "no invariant named like '" << name << "'";
  return none;
}

TEST(Checker, FailuresCarryTheirNumbers) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    for (const auto& x : check_variant(v).results) {
      SCOPED_TRACE(x.name);
      EXPECT_FALSE(x.detail.empty());
      EXPECT_NE(x.detail.find_first_of("0123456789"), std::string::npos) << x.detail;
      if (x.passed) continue;
      if (x.name == "shapes") {
        EXPECT_NE(x.detail.find("S/A ("), std::string::npos) << x.detail;
      } else {
        EXPECT_FALSE(x.value <= 0) << x.detail;  // NaN counts as a number here
      }
    }
  }
  // Hand-known values: scaling A by 0.9 misses every row sum by 0.1, and Y[0] = 0.9 V[0];
  // shifting Y by 0.1 moves Y[0] by exactly 0.1.
  const auto& all = variants();
  const auto by_name = [&](const std::string& n) {
    return *std::find_if(all.begin(), all.end(), [&](const Variant& v) { return v.name == n; });
  };
  EXPECT_NEAR(find(check_variant(by_name("rows of A scaled by 0.9"), false), "sum to 1").value,
              0.1, 1e-12);
  EXPECT_NEAR(find(check_variant(by_name("Y shifted by 0.1"), false), "Y[0]").value, 0.1, 1e-12);
  // With no mask, the mask's value is the largest weight above the diagonal.
  const Variant& open = by_name("no mask");
  const auto in = make_inputs(2, 5, 3, 4, 4, false);
  const auto A = run_variant(open, in[0], {in[1], in[2], in[3]}).A.to_vector();
  double leak = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = i + 1; j < 5; ++j) leak = std::max(leak, A[(b * 5 + i) * 5 + j]);
  EXPECT_GT(leak, 0.0);
  EXPECT_EQ(find(check_variant(open, false), "above the diagonal").value, leak);
}

TEST(Checker, ReportStrListsEveryInvariant) {
  for (const Variant* v : {&variants()[1], &variants()[4]}) {
    SCOPED_TRACE(v->name);
    const InvariantReport r = check_variant(*v);
    const std::string s = r.str();
    std::istringstream lines(s);
    std::string line;
    std::size_t k = 0;
    for (; std::getline(lines, line); ++k) {
      ASSERT_LT(k, r.results.size()) << s;
      const auto& x = r.results[k];
      EXPECT_EQ(line.find(x.passed ? "PASS" : "FAIL"), 2u) << line;
      EXPECT_NE(line.find(x.name), std::string::npos) << line;
      EXPECT_NE(line.find(x.detail), std::string::npos) << line;
    }
    EXPECT_EQ(k, r.results.size()) << s;
  }
}

TEST(Checker, GradientInvariantsAreOptional) {
  const Variant& broken = variants().back();
  ASSERT_EQ(std::string(broken.name), "scores through an op with a wrong backward");
  const InvariantReport r = check_variant(broken, false);
  EXPECT_EQ(r.results.size(), 5u) << r.str();
  EXPECT_TRUE(r.passed()) << "only the gradient invariants see a wrong backward\n" << r.str();
}

// At T = 1, or with window 1, A is the identity: Y cannot depend on W_Q or W_K, and the right
// gradient is exactly zero. The model is correct, so the report must pass (a gradcheck that
// proves nothing is not a wrong gradient).
TEST(Checker, PassesModelWhoseQueryAndKeyCannotMatter) {
  const std::pair<int64_t, int64_t> cases[] = {{1, 0}, {4, 1}};  // (T, window)
  for (const auto& [T, window] : cases) {
    SCOPED_TRACE("T " + std::to_string(T) + ", window " + std::to_string(window));
    const auto in = make_inputs(2, T, 3, 4, 4, false);
    tg::CheckerOptions co;
    co.window = window;
    const InvariantReport r = tg::check_attention(library_model({.window = window}), in[0],
                                                  {in[1], in[2], in[3]}, co);
    EXPECT_TRUE(r.passed()) << r.str();
    EXPECT_NE(find(r, "dY/dparameter 0").detail.find("zero"), std::string::npos)
        << "the detail should still say the check proves nothing";
  }
}

TEST(Checker, EmptyReportDoesNotPass) { EXPECT_FALSE(InvariantReport{}.passed()); }

TEST(Checker, PropagatesWhatTheFunctionThrows) {
  const auto in = make_inputs(0, 4, 3, 4, 4, false);
  EXPECT_THROW(tg::check_attention(library_model({.heads = 3}), in[0], {in[1], in[2], in[3]}),
               tg::ShapeError);
}

}  // namespace
