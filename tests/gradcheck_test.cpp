// The checker itself: it passes correct ops, and each negative control (an op recorded with a
// deliberately wrong backward) proves that it can fail, and says where.

#include <tapegrad/check/gradcheck.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>

namespace {

using tg::GradcheckOptions;
using tg::Grads;
using tg::Tensor;

GradcheckOptions quiet() {
  GradcheckOptions o;
  o.warn_vacuous = false;
  return o;
}

// Y = 2 X, but the backward multiplies by 2.1.
Tensor bad_scale(const Tensor& X) {
  return tg::record("bad_scale", tg::scale(X.detach(), 2.0), {X}).formula([](const Tensor& dY) -> Grads { return {tg::scale(dY, 2.1)}; });
}

// Softmax whose backward forgets the subtraction: dX = Y * dY.
Tensor bad_softmax(const Tensor& X) {
  return tg::record("bad_softmax", tg::softmax(X.detach()), {X}).formula([](const Tensor& dY, const Tensor& Y) -> Grads { return {tg::mul(Y, dY)}; });
}

// Y = A * B, with dB wrong by +0.5 at element (1, 2) of a (2, 3) B only.
Tensor bad_mul(const Tensor& A, const Tensor& B) {
  return tg::record("bad_mul", tg::mul(A.detach(), B.detach()), {A, B}).formula([A, B](const Tensor& dY) -> Grads {
                      const Tensor E = tg::from_vector({0, 0, 0, 0, 0, 0.5}, {2, 3});
                      return {tg::mul(dY, B), tg::mul(dY, tg::add(A, E))};
                    });
}

// Y = 3 X with a backward that adds a tiny, call-dependent amount: right to 1e-12, but not
// reproducible.
Tensor flaky_scale(const Tensor& X, std::shared_ptr<int> calls) {
  return tg::record("flaky_scale", tg::scale(X.detach(), 3.0), {X}).formula([calls](const Tensor& dY) -> Grads {
                      ++*calls;
                      return {tg::add(tg::scale(dY, 3.0), tg::scalar(1e-12 * *calls))};
                    });
}

// Y = X^3 elementwise, whose backward computes 3 X^2 dY on raw data: right to first order, but
// the gradient it returns is a constant, so its own derivative is silently zero.
Tensor raw_cube(const Tensor& X) {
  const Tensor Y = tg::mul(tg::mul(X.detach(), X.detach()), X.detach());
  return tg::record("raw_cube", Y, {X}).formula([X](const Tensor& dY) -> Grads {
    const auto x = X.to_vector(), dy = dY.to_vector();
    std::vector<double> dx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) dx[i] = 3 * x[i] * x[i] * dy[i];
    return {tg::from_vector(dx, X.shape(), X.dtype())};
  });
}

Tensor randn(const tg::Shape& s, uint64_t seed) {
  tg::Rng rng(seed);
  return tg::randn(s, rng);
}

TEST(Gradcheck, PassesCorrectOps) {
  const Tensor W = randn({3, 2}, 2);
  const tg::Function f = [W](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{tg::softmax(tg::matmul(x[0], W)), tg::mul(x[0], x[0])};
  };
  const auto r = tg::gradcheck(f, {randn({2, 3}, 1)});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_TRUE(r.deterministic);
  EXPECT_FALSE(r.vacuous);
  EXPECT_EQ(r.entries, 2 * (2 * 2 + 2 * 3) * 6);  // (derivative forms) x (outputs) x (inputs)
  EXPECT_EQ(r.message.rfind("ok", 0), 0u) << r.message;
}

TEST(Gradcheck, FailsWrongScaleBackward) {
  const Tensor x = tg::from_vector({1, -2, 3}, {3});
  const auto r = tg::gradcheck([](const std::vector<Tensor>& v) { return bad_scale(v[0]); }, {x});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.input, 0);
  EXPECT_EQ(r.element, r.output_element);  // the Jacobian is diagonal; only the diagonal is off
  EXPECT_NEAR(r.analytical, 2.1, 1e-12);
  EXPECT_NEAR(r.numerical, 2.0, 1e-6);
  EXPECT_NE(r.message.find("gradcheck failed"), std::string::npos) << r.message;
}

TEST(Gradcheck, FailsSoftmaxBackwardWithoutSubtraction) {
  const auto r = tg::gradcheck([](const std::vector<Tensor>& v) { return bad_softmax(v[0]); },
                               {randn({2, 4}, 3)});
  EXPECT_FALSE(r.passed) << r.message;
  // The correct softmax passes on the same input, so the failure is the backward's.
  EXPECT_TRUE(tg::gradcheck([](const std::vector<Tensor>& v) { return tg::softmax(v[0]); },
                            {randn({2, 4}, 3)}));
}

TEST(Gradcheck, NamesTheWorstEntry) {
  const Tensor A = tg::from_vector({1, 2, 3, 4, 5, 3}, {2, 3});
  const Tensor B = tg::from_vector({-1, 0.5, 2, 1, -3, 0.25}, {2, 3});
  const auto r =
      tg::gradcheck([](const std::vector<Tensor>& v) { return bad_mul(v[0], v[1]); }, {A, B});
  ASSERT_FALSE(r.passed);
  // dY(1,2)/dB(1,2) = A(1,2) = 3; the backward says 3.5.
  EXPECT_EQ(r.input, 1);
  EXPECT_EQ(r.element, 5);
  EXPECT_EQ(r.output, 0);
  EXPECT_EQ(r.output_element, 5);
  EXPECT_NEAR(r.analytical, 3.5, 1e-12);
  EXPECT_NEAR(r.numerical, 3.0, 1e-6);
  EXPECT_NE(r.message.find("input 1 element (1, 2), output 0 element (1, 2)"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("analytical 3.5"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("numerical"), std::string::npos) << r.message;
}

TEST(Gradcheck, FailsNonDeterministicBackward) {
  auto calls = std::make_shared<int>(0);
  const tg::Function f = [calls](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{flaky_scale(v[0], calls)};
  };
  const auto r = tg::gradcheck(f, {randn({3}, 4)});
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(r.deterministic);
  EXPECT_NE(r.message.find("not deterministic"), std::string::npos) << r.message;
  // The values are right to 1e-12, so it is the determinism check that fails it.
  GradcheckOptions o;
  o.check_determinism = false;
  EXPECT_TRUE(tg::gradcheck(f, {randn({3}, 4)}, o).passed);
}

// A backward that returns NaN fails as a wrong value at a named entry, not as "non-deterministic"
// (NaN != NaN must not trip the determinism check).
TEST(Gradcheck, NanGradientFailsAsAValueNotAsNonDeterminism) {
  const tg::ScalarFunction f = [](const std::vector<Tensor>& v) {
    return tg::sum(
        tg::record("nan_backward", tg::scale(v[0].detach(), 2.0), {v[0]}).formula([](const Tensor& dY) -> Grads { return {tg::full(dY.shape(), std::nan(""))}; }));
  };
  const auto r = tg::gradcheck(f, {tg::from_vector({1, 2}, {2})});
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(r.deterministic) << r.message;
  EXPECT_EQ(r.input, 0);
  EXPECT_TRUE(std::isnan(r.analytical));
  EXPECT_NE(r.message.find("nan"), std::string::npos) << r.message;
}

TEST(Gradcheck, FastModePassesCorrectAndFailsWrong) {
  GradcheckOptions o;
  o.fast_mode = true;
  const Tensor W = randn({4, 3}, 6);
  const auto good = tg::gradcheck(
      [W](const std::vector<Tensor>& v) { return tg::softmax(tg::matmul(v[0], v[1])); },
      {randn({2, 4}, 5), W}, o);
  EXPECT_TRUE(good.passed) << good.message;
  EXPECT_EQ(good.entries, 2 * 2);  // one projection per input and derivative form
  const auto bad = tg::gradcheck([](const std::vector<Tensor>& v) { return bad_softmax(v[0]); },
                                 {randn({2, 4}, 3)}, o);
  EXPECT_FALSE(bad.passed) << bad.message;
  EXPECT_EQ(bad.element, -1);
  EXPECT_NE(bad.message.find("random projection"), std::string::npos) << bad.message;
  const auto bad2 = tg::gradcheck([](const std::vector<Tensor>& v) { return bad_scale(v[0]); },
                                  {randn({5}, 7)}, o);
  EXPECT_FALSE(bad2.passed) << bad2.message;
}

TEST(Gradcheck, Float32ComputationCheckedInDouble) {
  tg::Rng rng(8);
  const Tensor x = tg::randn({2, 3}, rng, tg::Dtype::f32);
  const Tensor w = tg::randn({3, 2}, rng, tg::Dtype::f32);
  const tg::ScalarFunction f = [](const std::vector<Tensor>& v) {
    return tg::sum_of_squares(tg::softmax(tg::matmul(v[0], v[1])));
  };
  const auto r = tg::gradcheck(f, {x, w});  // in_double by default
  EXPECT_TRUE(r.passed) << r.message;
  // Without the conversion, a step of 1e-6 is below float32 resolution near 1: the differences
  // are noise and the check fails, which is why in_double is the default.
  GradcheckOptions o;
  o.in_double = false;
  EXPECT_FALSE(tg::gradcheck(f, {x, w}, o).passed);
}

TEST(Gradcheck, SumOfSoftmaxIsVacuous) {
  const tg::ScalarFunction f = [](const std::vector<Tensor>& v) {
    return tg::sum(tg::softmax(v[0]));
  };
  const auto r = tg::gradcheck(f, {randn({2, 4}, 9)}, quiet());
  EXPECT_TRUE(r.vacuous);
  EXPECT_TRUE(r.passed);  // vacuously
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("proves nothing"), std::string::npos) << r.warnings[0];
  // Fixed random weights instead of a plain sum make the same check meaningful.
  const Tensor R = randn({2, 4}, 10);
  const auto weighted = tg::gradcheck(
      [R](const std::vector<Tensor>& v) { return tg::sum(tg::mul(tg::softmax(v[0]), R)); },
      {randn({2, 4}, 9)}, quiet());
  EXPECT_FALSE(weighted.vacuous);
  EXPECT_TRUE(weighted.passed) << weighted.message;
  EXPECT_TRUE(weighted.warnings.empty());
}

TEST(Gradgradcheck, PassesCorrectOps) {
  const tg::Function f = [](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{tg::softmax(tg::matmul(v[0], v[1])), tg::mul(v[0], v[0])};
  };
  const auto r = tg::gradgradcheck(f, {randn({2, 3}, 12), randn({3, 3}, 13)});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_FALSE(r.vacuous);
  const auto s = tg::gradgradcheck(
      [](const std::vector<Tensor>& v) { return tg::scale(tg::sum_of_squares(v[0]), 0.5); },
      {randn({4}, 14)});
  EXPECT_TRUE(s.passed) << s.message;
}

TEST(Gradgradcheck, FailsBackwardNotWrittenWithOps) {
  const Tensor x = tg::from_vector({0.5, -1.25, 2}, {3});
  const tg::ScalarFunction f = [](const std::vector<Tensor>& v) {
    return tg::sum_of_squares(raw_cube(v[0]));
  };
  // First order is right, so only the second-order check can catch it.
  const auto first = tg::gradcheck(f, {x});
  EXPECT_TRUE(first.passed) << first.message;
  const auto second = tg::gradgradcheck(f, {x}, quiet());
  EXPECT_FALSE(second.passed) << second.message;
  EXPECT_NEAR(second.analytical, 0.0, 1e-12);  // the silent zero
  EXPECT_GT(std::fabs(second.numerical), 1e-3);
}

TEST(Gradgradcheck, FailsWrongFirstOrderBackward) {
  const auto r = tg::gradgradcheck([](const std::vector<Tensor>& v) { return bad_softmax(v[0]); },
                                   {randn({2, 3}, 15)});
  EXPECT_FALSE(r.passed) << r.message;
}

TEST(Gradcheck, MultipleOutputsIndexTheFailingOne) {
  const Tensor x = tg::from_vector({1, 2}, {2});
  const tg::Function f = [](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{tg::scale(v[0], 2.0), bad_scale(v[0])};
  };
  const auto r = tg::gradcheck(f, {x});
  ASSERT_FALSE(r.passed);
  EXPECT_EQ(r.output, 1);
  EXPECT_NE(r.message.find("output 1"), std::string::npos) << r.message;
}

TEST(Gradcheck, RejectsBadOptionsAndUndefinedInputs) {
  GradcheckOptions o;
  o.eps = 0;
  const tg::ScalarFunction f = [](const std::vector<Tensor>& v) {
    return tg::sum_of_squares(v[0]);
  };
  EXPECT_THROW(tg::gradcheck(f, {randn({2}, 16)}, o), tg::ValueError);
  EXPECT_THROW(tg::gradcheck(f, {Tensor()}), tg::ValueError);
  EXPECT_THROW(tg::gradgradcheck(f, {Tensor()}), tg::ValueError);
}

// Y = X^2 with a right kernel (2 X dY) beside a wrong formula (3 X dY): the kind of custom op a
// user writes with a fast kernel and a formula for create_graph. The default backward runs the
// kernel, so only a check of each derivative form on its own can see the formula's error.
Tensor square_wrong_formula(const Tensor& X) {
  return tg::record("square_wrong_formula", tg::mul(X.detach(), X.detach()), {X})
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads { return {tg::mul(tg::scale(X, 3.0), dY)}; })
      .kernel([X](const Tensor& dY) -> Grads { return {tg::mul(tg::scale(X, 2.0), dY)}; });
}
// The same op with both forms right.
Tensor square_right(const Tensor& X) {
  return tg::record("square_right", tg::mul(X.detach(), X.detach()), {X})
      .saves(X)
      .formula([X](const Tensor& dY) -> Grads { return {tg::mul(tg::scale(X, 2.0), dY)}; })
      .kernel([X](const Tensor& dY) -> Grads { return {tg::mul(tg::scale(X, 2.0), dY)}; });
}

TEST(Gradcheck, ChecksTheFormulaBesideTheKernel) {
  const Tensor x = randn({2, 3}, 21);
  const auto right = tg::gradcheck([](const std::vector<Tensor>& v) { return square_right(v[0]); }, {x});
  EXPECT_TRUE(right.passed) << right.message;
  // The kernel alone is right: a plain backward gives 2 x.
  Tensor xl = x.detach().clone().set_requires_grad();
  tg::sum(square_wrong_formula(xl)).backward();
  const auto g = xl.grad().to_vector(), xv = x.to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(g[i], 2 * xv[i]);
  for (bool fast : {false, true}) {
    GradcheckOptions o = quiet();
    o.fast_mode = fast;
    const auto r = tg::gradcheck(
        [](const std::vector<Tensor>& v) { return square_wrong_formula(v[0]); }, {x}, o);
    EXPECT_FALSE(r.passed) << "fast " << fast;
    EXPECT_NE(r.message.find("by the formulas"), std::string::npos) << r.message;
    EXPECT_EQ(r.form, "formulas");
  }
}

// Indices stay int64 (an embedding refuses anything else): only the floating input is checked.
TEST(Gradcheck, KeepsInt64InputsAsTheyAre) {
  const Tensor W = randn({5, 3}, 22);
  const Tensor idx = tg::from_indices({4, 0, 2, 4}, {2, 2});
  auto f = [](const std::vector<Tensor>& v) {
    EXPECT_EQ(v[1].dtype(), tg::Dtype::i64);
    EXPECT_FALSE(v[1].requires_grad());
    return tg::mul(tg::embedding(v[1], v[0]), tg::from_vector({1, -2, 0.5}, {3}, tg::Dtype::f64));
  };
  const auto r = tg::gradcheck(f, {W, idx});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.entries, 2 * 12 * 15);  // two forms x (2, 2, 3) outputs x (5, 3) weights
  const auto rr = tg::gradgradcheck(f, {W, idx});
  EXPECT_TRUE(rr.passed) << rr.message;
}

// As PyTorch's: when some inputs require grad only they are checked, the rest are constants
// (a class weight cross_entropy refuses to differentiate); when none does, every floating one.
TEST(Gradcheck, ChecksTheInputsThatRequireGradAndPassesTheRestAsTheyAre) {
  const Tensor logits = randn({4, 3}, 23).set_requires_grad();
  const Tensor w = tg::from_vector({0.5, 2.0, 1.0}, {3}, tg::Dtype::f64);
  const Tensor t = tg::from_indices({2, 0, 1, 1}, {4});
  auto f = [&](const std::vector<Tensor>& v) {
    EXPECT_FALSE(v[1].requires_grad());
    return tg::cross_entropy(v[0], t, {.weight = v[1], .label_smoothing = 0.1});
  };
  const auto r = tg::gradcheck(f, {logits, w});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_EQ(r.entries, 2 * 12);  // two forms x the logits' 12 entries; w is not checked
  const auto rr = tg::gradgradcheck(f, {logits, w});
  EXPECT_TRUE(rr.passed) << rr.message;
  // Nothing marked: both inputs are checked (a product, so that w's gradient is not zero).
  auto g = [](const std::vector<Tensor>& v) { return tg::mul(v[0], v[1]); };
  EXPECT_EQ(tg::gradcheck(g, {randn({3}, 24), randn({3}, 25)}).entries, 2 * 2 * 9);
  EXPECT_EQ(tg::gradcheck(g, {randn({3}, 24), randn({3}, 25).set_requires_grad()}).entries, 2 * 9);
}

TEST(Gradcheck, LeavesGradModeAndInputsAlone) {
  const Tensor x = randn({2, 3}, 17);
  const auto before = x.to_vector();
  const auto r =
      tg::gradgradcheck([](const std::vector<Tensor>& v) { return tg::softmax(v[0]); }, {x});
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_TRUE(tg::is_grad_enabled());
  EXPECT_EQ(x.to_vector(), before);
  EXPECT_FALSE(x.requires_grad());
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
