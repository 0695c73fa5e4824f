// The registry drives gradcheck and gradgradcheck of every op case (OpInfo style), and a float32
// run of every case against its float64 result.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/check/registry.h>
#include <tapegrad/ops/op_list.h>

namespace tg {
// gtest prints the parameter of a failing test with this.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name << " on " << c.shapes(); }
}  // namespace tg

namespace {

using tg::OpCase;

const std::vector<OpCase>& registry() {
  static const std::vector<OpCase> cases = tg::op_cases();
  return cases;
}

std::string sanitise(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class OpGradcheck : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  SCOPED_TRACE(c.name + " on " + c.shapes());
  const tg::GradcheckResult r = tg::gradcheck(c.fn, c.inputs, c.options);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_TRUE(r.deterministic) << r.message;
  EXPECT_FALSE(r.vacuous) << "the check proves nothing: both Jacobians are zero";
  EXPECT_GT(r.entries, 0);
}

TEST_P(OpGradcheck, SecondOrderMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  if (!c.second_order) GTEST_SKIP() << c.name << " is registered as first-order only";
  SCOPED_TRACE(c.name + " on " + c.shapes());
  const tg::GradcheckResult r = tg::gradgradcheck(c.fn, c.inputs, c.options);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_FALSE(r.vacuous) << "the check proves nothing: both Jacobians are zero";
}

// The derivative contract: without create_graph the engine runs an op's kernel (where it has
// one), with create_graph its formula in ops; both must give the same gradients.
TEST_P(OpGradcheck, KernelAndFormulaAgree) {
  const OpCase& c = GetParam();
  SCOPED_TRACE(c.name + " on " + c.shapes());
  auto leaves = [&] {
    std::vector<tg::Tensor> x;
    for (const tg::Tensor& t : c.inputs) x.push_back(t.detach().clone().set_requires_grad());
    return x;
  };
  std::vector<tg::Tensor> xk = leaves(), xf = leaves();
  const std::vector<tg::Tensor> yk = c.fn(xk), yf = c.fn(xf);
  std::vector<tg::Tensor> w;  // fixed random grad_outputs
  tg::Rng rng(17);
  for (const tg::Tensor& y : yk) w.push_back(tg::randn(y.shape(), rng));
  const auto gk = tg::grad(yk, xk, w, /*create_graph=*/false);
  const auto gf = tg::grad(yf, xf, w, /*create_graph=*/true);
  // Relative to each input's own gradient; one that is zero (dQ at T = 1: the softmax of one
  // entry) is judged against the largest gradient of the case instead, since a kernel's terms
  // cancel to exactly 0 only where the CPU's rounding happens to make them.
  double floor = 1e-300;
  for (const tg::Tensor& g : gf)
    for (double v : g.to_vector()) floor = std::max(floor, std::fabs(v));
  for (std::size_t i = 0; i < gk.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    const auto a = gk[i].to_vector(), b = gf[i].to_vector();
    ASSERT_EQ(a.size(), b.size());
    double scale = 1e-300;
    for (double v : b) scale = std::max(scale, std::fabs(v));
    if (scale < 1e-12 * floor) scale = floor;
    for (std::size_t k = 0; k < a.size(); ++k)
      EXPECT_LE(std::fabs(a[k] - b[k]), 1e-12 * scale) << "at " << k << ": kernel " << a[k]
                                                        << ", formula " << b[k];
  }
}

// Forward in float32 agrees with float64 on the same (float32-rounded) inputs, and the backward
// pass runs in float32 and agrees with float64 too.
TEST_P(OpGradcheck, RunsInFloat32) {
  const OpCase& c = GetParam();
  SCOPED_TRACE(c.name + " on " + c.shapes());
  std::vector<tg::Tensor> x32, x64;
  for (const tg::Tensor& x : c.inputs) {
    x32.push_back(x.detach().to(tg::Dtype::f32).set_requires_grad());
    x64.push_back(x32.back().detach().to(tg::Dtype::f64).set_requires_grad());
  }
  const std::vector<tg::Tensor> y32 = c.fn(x32), y64 = c.fn(x64);
  ASSERT_EQ(y32.size(), y64.size());
  std::vector<tg::Tensor> w32, w64;  // fixed random grad_outputs
  tg::Rng rng(11);
  for (std::size_t j = 0; j < y32.size(); ++j) {
    SCOPED_TRACE("output " + std::to_string(j));
    ASSERT_EQ(y32[j].dtype(), tg::Dtype::f32);
    ASSERT_EQ(y32[j].shape(), y64[j].shape());
    const auto a = y32[j].to_vector(), b = y64[j].to_vector();
    double scale = 1.0;
    for (double v : b) scale = std::max(scale, std::fabs(v));
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5 * scale) << "at " << k;
    w64.push_back(tg::randn(y64[j].shape(), rng));
    w32.push_back(w64.back().to(tg::Dtype::f32));
  }
  const auto g32 = tg::grad(y32, x32, w32), g64 = tg::grad(y64, x64, w64);
  for (std::size_t i = 0; i < g32.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    ASSERT_EQ(g32[i].dtype(), tg::Dtype::f32);
    const auto a = g32[i].to_vector(), b = g64[i].to_vector();
    double scale = 1.0;
    for (double v : b) scale = std::max(scale, std::fabs(v));
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-4 * scale) << "at " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, OpGradcheck, ::testing::ValuesIn(registry()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return sanitise(info.param.name);
                         });

TEST(Registry, CoversEveryOp) {
  // Every op of the op list has cases, and every case belongs to an op of the list (or to a
  // composition: the attention models), so the list cannot go stale either way.
  for (const tg::OpInfo& op : tg::op_list()) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(std::any_of(registry().begin(), registry().end(),
                            [&](const OpCase& c) { return c.op == op.name; }))
        << "no registry case for op '" << op.name << "'";
  }
  for (const OpCase& c : registry()) {
    const bool listed = std::any_of(tg::op_list().begin(), tg::op_list().end(),
                                    [&](const tg::OpInfo& op) { return c.op == op.name; });
    EXPECT_TRUE(listed || c.op == "attention") << c.name << ": op not in ops/op_list.cpp";
  }
}

TEST(Registry, CaseNamesAreUniqueAndNameTheirOp) {
  std::set<std::string> names;
  for (const OpCase& c : registry()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.name.rfind(c.op + "/", 0), 0u) << "a case name starts with its op";
    EXPECT_TRUE(names.insert(sanitise(c.name)).second) << "duplicate test name";
  }
}

TEST(Registry, InputsAreFloat64AndReproducible) {
  const std::vector<OpCase> again = tg::op_cases();
  ASSERT_EQ(again.size(), registry().size());
  for (std::size_t k = 0; k < again.size(); ++k) {
    SCOPED_TRACE(again[k].name);
    ASSERT_EQ(again[k].inputs.size(), registry()[k].inputs.size());
    for (std::size_t i = 0; i < again[k].inputs.size(); ++i) {
      EXPECT_EQ(again[k].inputs[i].dtype(), tg::Dtype::f64);
      EXPECT_EQ(again[k].inputs[i].to_vector(), registry()[k].inputs[i].to_vector());
    }
  }
}

TEST(Registry, ShapesListsTheInputShapes) {
  OpCase c;
  c.inputs = {tg::zeros({3, 4}), tg::zeros({4}), tg::scalar(1.0)};
  EXPECT_EQ(c.shapes(), "(3, 4), (4,), ()");
}

}  // namespace
