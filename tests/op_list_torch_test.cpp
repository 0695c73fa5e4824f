// Every op of the op list (ops/op_list.cpp) against PyTorch (tests/op_list_reference.py), driven
// by the list itself: each row at op_list_small()'s sizes runs in tapegrad and in PyTorch by the
// shared runner (tests/ops_torch_util.h): the float64 output, the gradient of a random-weighted
// sum for every input (by the kernels and by the formulas), the second derivative through
// create_graph, each to 1e-12 relative, and the float32 forward to 1e-5. A row without a PyTorch
// counterpart names its reference instead. A new op's row is compared here as soon as it is
// listed: without its PyTorch form the script fails, naming it.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/ops/op_list.h>
#include <tapegrad/ops/ops.h>
#include "ops_torch_util.h"

namespace {

using tg::Tensor;
using tg::test::MultiCase;

// The case of a row: its small inputs (|x| + 0.5 for the ops of a positive domain), named by the
// row.
MultiCase case_of(const tg::OpInfo& row, const std::string& spec, tg::Rng& rng) {
  MultiCase c{.spec = spec, .shapes = row.sample_shapes, .op = row.call};
  if (row.domain == tg::OpDomain::positive)
    for (const tg::Shape& s : row.sample_shapes)
      c.given.push_back(tg::in_domain(row, tg::randn(s, rng, tg::Dtype::f64)));
  return c;
}

const tg::OpInfo& row_named(const std::string& name) {
  for (const tg::OpInfo& row : tg::op_list_small())
    if (name == row.name) return row;
  throw std::runtime_error("no row " + name);
}

TEST(OpListTorch, EveryOpAgreesWithPyTorch) {
  tg::Rng rng(2030);
  std::vector<MultiCase> cases;
  for (const tg::OpInfo& row : tg::op_list_small())
    if (row.reference == nullptr) cases.push_back(case_of(row, row.name, rng));
  tg::test::run_multi_cases(cases, 2031, TAPEGRAD_OP_LIST_REFERENCE_PY);
}

// The ops op_list_reference.py has a PyTorch form for, by name.
std::vector<std::string> pytorch_forms() {
  const std::string script = TAPEGRAD_OP_LIST_REFERENCE_PY;
  const std::string dir = script.substr(0, script.rfind('/'));
  std::istringstream out(tg::test::run_python("import sys\nsys.path.insert(0, '" + dir +
                                              "')\nimport op_list_reference as r\n"
                                              "print(' '.join(r.OPS))\n"));
  std::vector<std::string> names;
  for (std::string name; out >> name;) names.push_back(name);
  return names;
}

// Every row has a PyTorch form or names its reference, not both; the two lists have the same rows.
TEST(OpListTorch, EveryRowWithoutPyTorchNamesItsReference) {
  ASSERT_EQ(tg::test::python_missing("numpy, torch"), "");
  const std::vector<std::string> forms = pytorch_forms();
  ASSERT_GT(forms.size(), 50u);
  for (const tg::OpInfo& row : tg::op_list_small()) {
    const bool has_form = std::find(forms.begin(), forms.end(), row.name) != forms.end();
    EXPECT_NE(has_form, row.reference != nullptr)
        << row.name << ": a PyTorch form in op_list_reference.py, or a reference in its row";
  }
  ASSERT_EQ(tg::op_list_small().size(), tg::op_list().size());
  for (std::size_t i = 0; i < tg::op_list().size(); ++i) {
    const tg::OpInfo &small = tg::op_list_small()[i], &bench = tg::op_list()[i];
    EXPECT_STREQ(small.name, bench.name);
    if (small.reference != nullptr) {
      EXPECT_GT(std::string(small.reference).size(), 10u) << small.name;
      EXPECT_STREQ(small.reference, bench.reference);
    }
  }
}

// The small rows are the benchmarks' rows at other sizes: the same ranks, smaller axes.
TEST(OpListTorch, SmallRowsHaveTheBenchmarksRanks) {
  for (std::size_t i = 0; i < tg::op_list().size(); ++i) {
    const tg::OpInfo &small = tg::op_list_small()[i], &bench = tg::op_list()[i];
    ASSERT_EQ(small.sample_shapes.size(), bench.sample_shapes.size()) << small.name;
    for (std::size_t k = 0; k < small.sample_shapes.size(); ++k) {
      EXPECT_EQ(small.sample_shapes[k].rank(), bench.sample_shapes[k].rank()) << small.name;
      EXPECT_LE(small.sample_shapes[k].numel(), 1000) << small.name;
    }
  }
}

// The rows whose tapegrad op is given another row's PyTorch form of the same shapes: every
// pair must be caught (a negative control of the comparison itself).
void run_swapped_rows() {
  tg::Rng rng(2032);
  const std::vector<std::pair<std::string, std::string>> swaps = {
      {"softmax", "softmax_dim"}, {"add", "sub"},          {"sigmoid", "silu"},
      {"max_pool2d", "avg_pool2d"}, {"amax", "max"},       {"rope", "rotary"}};
  std::vector<MultiCase> cases;
  for (const auto& [ours, theirs] : swaps) {
    MultiCase c = case_of(row_named(ours), theirs, rng);
    if (ours == "amax") c.ties = true;  // amax and max differ only in how a tie's gradient splits
    if (ours == "rope") c.shapes = row_named("rotary").sample_shapes;  // rope takes any rank >= 2
    cases.push_back(c);
  }
  tg::test::run_multi_cases(cases, 2033, TAPEGRAD_OP_LIST_REFERENCE_PY);
}

TEST(OpListTorch, NegativeControlSwappedRowsDisagree) {
  testing::TestPartResultArray failures;
  {
    const testing::ScopedFakeTestPartResultReporter intercept(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    run_swapped_rows();
  }
  for (const char* theirs : {"softmax_dim (case", "sub (case", "silu (case", "avg_pool2d (case",
                             "max (case", "rotary (case"}) {
    bool caught = false;
    for (int i = 0; i < failures.size(); ++i)
      caught = caught || std::string(failures.GetTestPartResult(i).message()).find(theirs) !=
                             std::string::npos;
    EXPECT_TRUE(caught) << "a swapped row agreed with PyTorch: " << theirs;
  }
}

}  // namespace
