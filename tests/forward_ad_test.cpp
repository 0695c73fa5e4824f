// Forward mode (autograd/forward_ad.h): every op's tangent rule on every registry case, dual
// tensors and levels, the rule's errors, and a negative control (a wrong rule fails the check).

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/check/registry.h>
#include <tapegrad/ops/op_list.h>
#include <tapegrad/ops/ops.h>

namespace {

using tg::Tensor;
using tg::Tangents;
namespace fwad = tg::fwad;

const std::map<std::string, std::vector<tg::OpCase>>& cases_by_op() {
  static const auto by_op = [] {
    std::map<std::string, std::vector<tg::OpCase>> m;
    for (tg::OpCase& c : tg::op_cases()) m[c.op].push_back(std::move(c));
    return m;
  }();
  return by_op;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& [op, cases] : cases_by_op()) names.push_back(op);
  return names;
}

std::string sanitise(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// One test per op: each of its registry cases, J t against central differences, <u, J t>
// against the reverse pass, and (where the case is second order) forward over reverse against
// reverse over reverse.
class ForwardAD : public ::testing::TestWithParam<std::string> {};

TEST_P(ForwardAD, EveryCaseMatchesFiniteDifferencesAndTheReversePass) {
  const std::vector<tg::OpCase>& cases = cases_by_op().at(GetParam());
  for (const tg::OpCase& c : cases) {
    SCOPED_TRACE(c.name + " on " + c.shapes());
    const tg::GradcheckResult r = tg::check_forward_ad(c.fn, c.inputs, c.options, c.second_order);
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_GT(r.entries, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, ForwardAD, ::testing::ValuesIn(op_names()),
                         [](const auto& info) { return sanitise(info.param); });

// Every op of the op list has registry cases, so the test above reaches every rule.
TEST(ForwardADCoverage, EveryListedOpHasRegistryCases) {
  for (const tg::OpInfo& info : tg::op_list_small())
    EXPECT_TRUE(cases_by_op().count(info.name)) << info.name << " has no registry case";
}


// README begin: a custom op
// swiglu(A, B) = silu(A) * B as one op of a user's (A and B of one shape):
//   dA = dY B silu'(A),  dB = dY silu(A),  tY = tA B silu'(A) + tB silu(A),
//   silu'(A) = s (1 + A (1 - s)),  s = sigmoid(A)
tg::Tensor swiglu(const tg::Tensor& A, const tg::Tensor& B) {
  using namespace tg;
  if (A.shape() != B.shape())
    throw ShapeError("swiglu: shapes differ: " + A.shape().str() + " and " + B.shape().str());
  const Tensor Y = mul(silu(A.detach()), B.detach());  // the forward, by ops off the tape
  auto dsilu = [](const Tensor& a) { return mul(sigmoid(a), add(mul(a, sub(1.0, sigmoid(a))), 1.0)); };
  return record("swiglu", Y, {A, B})
      .saves(A, B)  // a later in-place change to A or B makes the backward refuse, not lie
      .formula([A, B, dsilu](const Tensor& dY) -> Grads {  // in ops: twice differentiable
        return {mul(dY, mul(B, dsilu(A))), mul(dY, silu(A))};
      })
      .kernel([A, B](const Tensor& dY) -> Grads {  // the same, one pass over the entries
        Tensor dA(A.shape(), A.dtype()), dB(B.shape(), B.dtype());
        dispatch(A.dtype(), [&]<class T>() {
          const T *a = A.data<T>(), *b = B.data<T>(), *dy = dY.data<T>();
          T *da = dA.data<T>(), *db = dB.data<T>();
          for (int64_t i = 0; i < A.numel(); ++i) {
            const T s = 1 / (1 + std::exp(-a[i]));
            da[i] = dy[i] * b[i] * s * (1 + a[i] * (1 - s));
            db[i] = dy[i] * a[i] * s;
          }
        });
        return {dA, dB};
      })
      .jvp([A, B, dsilu](const Tangents& t) {  // forward mode; t[i] undefined: a zero tangent
        Tensor tY;
        if (t[0].defined()) tY = mul(t[0], mul(B, dsilu(A)));
        if (t[1].defined()) tY = tY.defined() ? add(tY, mul(t[1], silu(A))) : mul(t[1], silu(A));
        return tY;
      });
}
// README end

Tensor f64(std::vector<double> v, tg::Shape s) { return tg::from_vector(v, s, tg::Dtype::f64); }

TEST(Dual, MakeAndUnpack) {
  const Tensor x = f64({1, 2, 3}, {3}), t = f64({0.5, -1, 2}, {3});
  fwad::DualLevel level;
  const Tensor d = fwad::make_dual(x, t);
  const fwad::UnpackedDual p = fwad::unpack_dual(d);
  EXPECT_EQ(p.primal.to_vector(), x.to_vector());
  EXPECT_EQ(p.tangent.to_vector(), t.to_vector());
  EXPECT_FALSE(fwad::unpack_dual(p.primal).tangent.defined());  // the primal carries none
  EXPECT_FALSE(fwad::unpack_dual(x).tangent.defined());         // x itself is untouched
  // exp: J t = t * e^x.
  const Tensor y = tg::exp(d);
  const std::vector<double> jt = fwad::unpack_dual(y).tangent.to_vector();
  for (int k = 0; k < 3; ++k)  // (Eigen's vectorised exp against std::exp: a few ulps apart)
    EXPECT_NEAR(jt[k], t.to_vector()[k] * std::exp(x.to_vector()[k]), 1e-14 * std::exp(x.to_vector()[k]));
}

TEST(Dual, TangentsBelongToTheirLevel) {
  const Tensor x = f64({1, 2}, {2});
  Tensor y;
  {
    fwad::DualLevel level;
    y = tg::exp(fwad::make_dual(x, f64({1, 1}, {2})));
    EXPECT_TRUE(fwad::unpack_dual(y).tangent.defined());
  }
  fwad::DualLevel later;
  EXPECT_FALSE(fwad::unpack_dual(y).tangent.defined());
  EXPECT_FALSE(fwad::unpack_dual(tg::exp(y)).tangent.defined());
}

TEST(Dual, GradientsFlowBackThroughTheDual) {
  Tensor x = f64({1, 2}, {2});
  x.set_requires_grad();
  fwad::DualLevel level;
  // y = sum(x_dual * x), the dual's tangent t = e_0: dy/dx = 2 x, and y's tangent <t, x> = x_0.
  const Tensor y = tg::sum(tg::mul(fwad::make_dual(x, f64({1, 0}, {2})), x));
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, 4}));
  EXPECT_DOUBLE_EQ(fwad::unpack_dual(y).tangent.item(), 1.0);
}

// The fused attention's dual pass (grad mode off: the forward and the tangent in one pass) for
// every set of inputs carrying a tangent, against the rule in ops (the inputs requiring grad:
// the rule records), in float64, with a window and a query offset (a KV cache's last rows) and
// more rows than one block, and 512 keys (the transposed keys' rows, 4 KiB of float64, padded
// by a cache line: attention_kernels.cpp's key_stride), with and without a window. Where two of
// Q, K, V carry one, the pass pairs its products only partly, paths that check_forward_ad (all
// tangents, or one at a time) does not take.
TEST(DualPass, AttentionAgreesWithTheRuleForEveryTangentSet) {
  tg::Rng rng(11);
  struct Case {
    int64_t T, T_k, window, offset;
  };
  for (const Case sh :
       {Case{70, 70, 0, 0}, Case{5, 12, 0, 7}, Case{40, 40, 9, 0}, Case{70, 512, 0, 442},
        Case{70, 512, 60, 442}}) {
    const int64_t B = 2, H = 2, d = 4;
    const Tensor Q = tg::randn({B, sh.T, H * d}, rng, tg::Dtype::f64);
    const Tensor K = tg::randn({B, sh.T_k, H * d}, rng, tg::Dtype::f64);
    const Tensor V = tg::randn({B, sh.T_k, H * d}, rng, tg::Dtype::f64);
    const std::vector<Tensor> values = {Q, K, V};
    std::vector<Tensor> tangents;
    for (const Tensor& x : values) tangents.push_back(tg::randn(x.shape(), rng, tg::Dtype::f64));
    // tO with the tangents of the inputs in `set`, recorded (the rule in ops) or not (the pass)
    auto tangent_out = [&](int set, bool recorded) {
      const tg::GradModeGuard mode(recorded);
      fwad::DualLevel level;
      std::vector<Tensor> in;
      for (int i = 0; i < 3; ++i) {
        Tensor x = recorded ? values[i].detach().clone().set_requires_grad() : values[i];
        in.push_back(set & (1 << i) ? fwad::make_dual(x, tangents[i]) : x);
      }
      const Tensor O =
          tg::causal_attention_heads(in[0], in[1], in[2], H, 0.5, sh.window, sh.offset);
      return fwad::unpack_dual(O).tangent.detach();
    };
    auto max_diff = [](const Tensor& a, const Tensor& b) {
      const std::vector<double> x = a.to_vector(), y = b.to_vector();
      double m = 0;
      for (std::size_t k = 0; k < x.size(); ++k) m = std::max(m, std::fabs(x[k] - y[k]));
      return m;
    };
    for (int set = 1; set < 8; ++set) {
      SCOPED_TRACE("T " + std::to_string(sh.T) + ", T_k " + std::to_string(sh.T_k) + ", window " +
                   std::to_string(sh.window) + ", tangents on " + std::to_string(set));
      const Tensor pass = tangent_out(set, false), rule = tangent_out(set, true);
      EXPECT_LT(max_diff(pass, rule), 1e-12);
      // negative control: without one of its tangents (the lowest set bit) tO differs
      const int fewer = set & (set - 1);
      if (fewer != 0) {
        EXPECT_GT(max_diff(pass, tangent_out(fewer, true)), 1e-3);
      }
    }
  }
}

// Forward over reverse: inside a level, a backward computes with the formulas, whose ops carry
// tangents; the gradient's tangent is the Hessian times t.
TEST(Dual, ForwardOverReverseGivesTheHessianTimesT) {
  Tensor x = f64({0.3, -0.7, 1.1}, {3});
  x.set_requires_grad();
  const Tensor t = f64({1, 2, -1}, {3});
  fwad::DualLevel level;
  const Tensor xd = fwad::make_dual(x, t);
  const Tensor loss = tg::sum(tg::mul(tg::exp(xd), xd));  // sum x e^x: H = diag((x + 2) e^x)
  const Tensor g = tg::grad({loss}, {x})[0];
  const std::vector<double> Ht = fwad::unpack_dual(g).tangent.to_vector();
  const std::vector<double> xv = x.to_vector(), tv = t.to_vector();
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(Ht[k], (xv[k] + 2) * std::exp(xv[k]) * tv[k], 1e-12);
}

// Forward mode on the tape (grad mode on, x requiring grad) records the rules' ops; a rule that
// reads the output (exp's) must not make the output, its tangent and its node hold each other:
// everything is freed with the last handle.
TEST(Dual, ForwardModeOnTheTapeLeavesNoCycle) {
  std::weak_ptr<tg::Node> exp_node, tangent_node;
  {
    Tensor x = f64({0.3, -0.7}, {2});
    x.set_requires_grad();
    fwad::DualLevel level;
    const Tensor y = tg::exp(tg::mul(fwad::make_dual(x, f64({1, 2}, {2})), x));
    exp_node = y.impl().grad_fn;
    tangent_node = fwad::unpack_dual(y).tangent.impl().grad_fn;
    EXPECT_FALSE(tangent_node.expired());  // the tangent is on the tape (reverse over forward)
    const Tensor g = tg::grad({tg::sum(y)}, {x})[0];  // forward over reverse too
    EXPECT_TRUE(fwad::unpack_dual(g).tangent.defined());
  }
  EXPECT_TRUE(exp_node.expired());
  EXPECT_TRUE(tangent_node.expired());
}

// A user's op with a formula and a tangent rule: y = x^3 (dX = 3 x^2 dY, tY = 3 x^2 tX).
Tensor cube(const Tensor& X, double rule_factor) {
  Tensor Y = tg::mul(tg::mul(X.detach(), X.detach()), X.detach());
  return tg::record("cube", Y, {X})
      .formula([X](const Tensor& dY) -> tg::Grads { return {tg::mul(dY, tg::scale(tg::mul(X, X), 3.0))}; })
      .jvp([X, rule_factor](const Tangents& t) { return tg::mul(t[0], tg::scale(tg::mul(X, X), rule_factor)); });
}

TEST(CheckForwardAD, PassesARightRuleAndFailsAWrongOne) {
  const Tensor x = f64({0.4, -1.3, 0.9}, {3});
  const tg::Function right = [](const std::vector<Tensor>& xs) { return std::vector<Tensor>{cube(xs[0], 3.0)}; };
  const tg::Function wrong = [](const std::vector<Tensor>& xs) { return std::vector<Tensor>{cube(xs[0], 3.3)}; };
  EXPECT_TRUE(tg::check_forward_ad(right, {x}, {}, true).passed);
  const tg::GradcheckResult bad = tg::check_forward_ad(wrong, {x});
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.message.find("central differences"), std::string::npos) << bad.message;
  EXPECT_NE(bad.message.find("<J^T u, t>"), std::string::npos) << bad.message;
  // gradcheck runs it by default: its reverse check passes, its forward check does not.
  const tg::GradcheckResult g = tg::gradcheck(wrong, {x});
  EXPECT_FALSE(g.passed);
  EXPECT_NE(g.forward_ad.find("check_forward_ad failed"), std::string::npos) << g.forward_ad;
  EXPECT_EQ(tg::gradcheck(right, {x}).forward_ad, "ok");
}

Tensor no_rule(const Tensor& X) {
  return tg::record("no_rule", X.detach().clone(), {X}).formula([](const Tensor& dY) -> tg::Grads { return {dY}; });
}

TEST(CheckForwardAD, AnOpWithoutARuleIsNamed) {
  const Tensor x = f64({1, 2}, {2});
  {
    fwad::DualLevel level;
    const Tensor d = fwad::make_dual(x, f64({1, 1}, {2}));
    try {
      no_rule(d);
      ADD_FAILURE() << "no error";
    } catch (const tg::GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("'no_rule' has no tangent rule"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(no_rule(x));  // no input carries a tangent: nothing to do
  }
  // gradcheck then checks reverse mode only and says so.
  const tg::Function f = [](const std::vector<Tensor>& xs) { return std::vector<Tensor>{no_rule(xs[0])}; };
  const tg::GradcheckResult r = tg::gradcheck(f, {x});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_NE(r.forward_ad.find("not checked"), std::string::npos) << r.forward_ad;
}

TEST(CheckForwardAD, ARuleOfTheWrongShapeIsAnError) {
  const Tensor x = f64({1, 2}, {2});
  fwad::DualLevel level;
  const Tensor d = fwad::make_dual(x, f64({1, 1}, {2}));
  EXPECT_THROW(tg::record("bad_rule", x.detach().clone(), {d}).jvp([](const Tangents& t) { return tg::sum(t[0]); }).output(),
               tg::GraphError);
}


// Anomaly mode sees forward mode too: a rule that makes a NaN or an infinity names the op, the
// user's line and the entry; without the guard the same call just computes.
TEST(Anomaly, ATangentThatIsNotFiniteIsNamed) {
  const Tensor x = f64({0.0, 1.0}, {2}), t = f64({1.0, 1.0}, {2});
  fwad::DualLevel level;
  const Tensor d = fwad::make_dual(x, t);
  EXPECT_FALSE(std::isfinite(fwad::unpack_dual(tg::log(d)).tangent.to_vector()[0]));  // t / x
  const tg::AnomalyGuard guard;
  try {
    tg::log(d);
    ADD_FAILURE() << "no error";
  } catch (const tg::ValueError& e) {
    const std::string m = e.what();
    for (const char* part : {"'log'", "forward_ad_test.cpp:", "inf", "(2,)"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  }
}

// The lines between a README marker pair in this file (begin: `marker`), as the README shows them.
std::string between_markers(const std::string& marker, std::size_t unindent) {
  std::ifstream in(TAPEGRAD_FORWARD_AD_TEST_CPP);
  std::string code, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (inside && line.substr(std::min(unindent, line.size())) == "// README end") break;
    if (inside) code += (line.size() >= unindent ? line.substr(unindent) : line) + "\n";
    if (line.substr(std::min(unindent, line.size())) == "// README begin: " + marker) inside = true;
  }
  return code;
}

void expect_in_readme(const std::string& code) {
  ASSERT_GT(code.size(), 200u);
  std::ifstream readme(TAPEGRAD_README_MD);
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find(code), std::string::npos) << "README.md does not show this verbatim:\n" << code;
}

// The custom op of the README: gradcheck (with its forward-mode check) and gradgradcheck pass,
// the kernel agrees with the formula, and the README shows the code.
TEST(CustomOp, SwigluIsCheckedInBothModesAndTheReadmeShowsIt) {
  tg::Rng rng(3);
  const std::vector<Tensor> in = {tg::randn({3, 4}, rng, tg::Dtype::f64), tg::randn({3, 4}, rng, tg::Dtype::f64)};
  const tg::Function f = [](const std::vector<Tensor>& x) { return std::vector<Tensor>{swiglu(x[0], x[1])}; };
  const tg::GradcheckResult r = tg::gradcheck(f, in);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.forward_ad, "ok");
  EXPECT_TRUE(tg::gradgradcheck(f, in).passed);
  EXPECT_TRUE(tg::check_forward_ad(f, in, {}, /*second_order=*/true).passed);
  // Against the composed ops it fuses.
  const Tensor want = tg::mul(tg::silu(in[0]), in[1]);
  EXPECT_EQ(swiglu(in[0], in[1]).to_vector(), want.to_vector());
  EXPECT_THROW(swiglu(in[0], f64({1, 2}, {2})), tg::ShapeError);
  expect_in_readme(between_markers("a custom op", 0));
}

// The README's forward-mode example, run here; the README must show it verbatim.
TEST(ForwardMode, ReadmeExampleRunsAndTheReadmeShowsIt) {
  // README begin: forward mode
  using namespace tg;
  Tensor x = from_vector({0.5, -1.0, 2.0}, {3}, Dtype::f64);
  Tensor t = from_vector({1.0, 0.0, 0.0}, {3}, Dtype::f64);
  Tensor Jt;
  {
    fwad::DualLevel level;                 // tangents live in their level
    Tensor xd = fwad::make_dual(x, t);     // x + t eps
    Tensor y = tanh(mul(xd, xd));          // every op's tangent rule runs on the way
    Jt = fwad::unpack_dual(y).tangent;     // J t: one forward pass, no backward
  }
  // The functional forms, as torch.func: f of tensors, the same J t.
  TensorFunction f = [](const Tensor& v) { return tanh(mul(v, v)); };
  auto [y, Jt2] = jvp(f, x, t);                        // (f(x), J t)
  Tensor J = jacobian(f, x, JacobianMode::forward);    // one forward pass per input entry
  TensorFunction s = [](const Tensor& v) { return sum(tanh(mul(v, v))); };
  Tensor H = hessian(s, x, JacobianMode::forward);     // forward over reverse
  // README end
  const std::vector<double> xv = x.to_vector();
  const double d0 = 2 * xv[0] * (1 - std::pow(std::tanh(xv[0] * xv[0]), 2));
  EXPECT_EQ(Jt.to_vector(), Jt2.to_vector());
  EXPECT_NEAR(Jt.to_vector()[0], d0, 1e-13);  // (vectorised tanh against std::tanh)
  EXPECT_EQ(Jt.to_vector()[1], 0.0);
  EXPECT_EQ(J.shape(), tg::Shape({3, 3}));
  EXPECT_NEAR(J.at({0, 0}), d0, 1e-13);
  EXPECT_EQ(J.at({1, 0}), 0.0);
  const Tensor Jr = jacobian(f, x);  // reverse mode: the same matrix
  for (int64_t k = 0; k < 9; ++k) EXPECT_NEAR(J.to_vector()[k], Jr.to_vector()[k], 1e-13);
  EXPECT_EQ(H.shape(), tg::Shape({3, 3}));
  const Tensor Hr = hessian(s, x);  // reverse over reverse: the same
  for (int64_t k = 0; k < 9; ++k) EXPECT_NEAR(H.to_vector()[k], Hr.to_vector()[k], 1e-12);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const double u = xv[i] * xv[i], th = std::tanh(u), want = i != j ? 0.0 : 2 * (1 - th * th) - 8 * u * th * (1 - th * th);
      EXPECT_NEAR(H.at({i, j}), want, 1e-12) << i << ", " << j;
    }
  expect_in_readme(between_markers("forward mode", 2));
}

}  // namespace
