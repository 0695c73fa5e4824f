// Error provenance: an error raised during backward names the forward op that recorded the node
// and the user's line that called it (std::source_location, always on).

#include <gtest/gtest.h>

#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;

// An op whose backward fails the way a shape bug would.
Tensor broken_op(const Tensor& x,
                 const std::source_location& where = std::source_location::current()) {
  return tg::record("broken_op", x.detach().clone(), {x},
                    where).formula([](const Tensor& dY) -> tg::Grads {
                      throw tg::ShapeError("broken_op: cannot use " + dY.shape().str());
                    });
}

TEST(Provenance, OpsRecordTheCallersLine) {
  Tensor x = tg::ones({2, 3}).set_requires_grad();
  const int line = __LINE__ + 1;
  const Tensor y = tg::softmax(x);
  const auto& where = y.impl().grad_fn->where;
  EXPECT_EQ(static_cast<int>(where.line()), line);
  EXPECT_NE(std::string(where.file_name()).find("provenance_test.cpp"), std::string::npos);
}

// The forms with PyTorch's axis arguments take the caller's line just as the one-argument forms.
TEST(Provenance, AxisFormsRecordTheCallersLine) {
  Tensor x = tg::ones({2, 3}).set_requires_grad();
  const tg::Tensor targets = tg::from_indices({0, 2}, {2});
  auto line_of = [](const Tensor& y) { return static_cast<int>(y.impl().grad_fn->where.line()); };
  const int line = __LINE__ + 1;
  const Tensor a = tg::softmax(x, 0), b = tg::log_softmax(x, -1), c = tg::transpose(x, 0, 1);
  const Tensor d = tg::sum(x, {0, 1}, true), e = tg::mean(x, {0, -1}), f = tg::sum(x, -1, true);
  const Tensor g = tg::cross_entropy(x, targets, {.label_smoothing = 0.1}),
               h = tg::cross_entropy(x, targets, -1);
  for (const Tensor& y : {a, b, c}) EXPECT_EQ(line_of(y), line);
  for (const Tensor& y : {d, e, f}) EXPECT_EQ(line_of(y), line + 1);
  EXPECT_EQ(line_of(g), line + 2);
  EXPECT_EQ(line_of(h), line + 3);
  const Tensor r3 = tg::ones({2, 3, 4}).set_requires_grad();
  const int line2 = __LINE__ + 1;
  const Tensor p = tg::transpose(r3, 0, 2);  // not the last two: recorded as the permute it is
  EXPECT_EQ(line_of(p), line2);
  EXPECT_NE(std::string(p.impl().grad_fn->where.file_name()).find("provenance_test.cpp"),
            std::string::npos);
}

TEST(Provenance, BackwardErrorNamesOpAndLine) {
  Tensor x = tg::ones({2, 3}).set_requires_grad();
  const int line = __LINE__ + 1;
  const Tensor y = broken_op(x);
  const Tensor L = tg::sum_of_squares(tg::scale(y, 2.0));
  tg::test::expect_throws<tg::ShapeError>(  // the same type as thrown inside
      [&] { L.backward(); },
      {"broken_op: cannot use (2, 3)", "in the backward of 'broken_op'",
       "provenance_test.cpp:" + std::to_string(line)});
  EXPECT_FALSE(x.grad().defined()) << "a failed backward must not leave a partial gradient";
}

TEST(Provenance, FreedGraphErrorNamesOpAndLine) {
  Tensor x = tg::ones({2, 2}).set_requires_grad();
  const int line = __LINE__ + 1;
  const Tensor L = tg::sum_of_squares(x);
  L.backward();
  tg::test::expect_throws<tg::GraphError>(
      [&] { L.backward(); },
      {"'sum_of_squares'", "provenance_test.cpp:" + std::to_string(line), "retain_graph=true"});
}

}  // namespace

namespace {

// The ops a formula records under create_graph (and the sums of gradients) carry the user's op
// and line: an error in the second backward points at the user's code, not at the library's.
TEST(Provenance, NodesABackwardRecordedNameTheUsersOpAndLine) {
  Tensor x = tg::from_vector({0.3, -0.7, 1.1}, {3}, tg::Dtype::f64).set_requires_grad();
  const int line = __LINE__ + 1;
  const Tensor y = tg::tanh(x);
  const Tensor L = tg::sum(tg::mul(y, y));  // y fans out twice: its gradient is a recorded sum
  const Tensor g = tg::grad({L}, {x}, {}, /*create_graph=*/true)[0];
  bool some_within = false;
  for (const Tensor& t : {g}) {
    const auto* n = t.impl().grad_fn.get();
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(static_cast<int>(n->where.line()), line);
    EXPECT_NE(std::string(n->where.file_name()).find("provenance_test.cpp"), std::string::npos);
    some_within = n->within != nullptr;
  }
  EXPECT_TRUE(some_within);
  // Write into y, which the recorded backward saved: the second backward refuses, naming the
  // user's tanh and line.
  y.detach().data<double>()[0] = 5.0;
  try {
    tg::sum(tg::mul(g, g)).backward();
    FAIL() << "expected a tg::GraphError";
  } catch (const tg::GraphError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("within the backward of 'tanh'"), std::string::npos) << m;
    EXPECT_NE(m.find("provenance_test.cpp:" + std::to_string(line)), std::string::npos) << m;
    EXPECT_EQ(m.find("/ops/"), std::string::npos) << m;
    EXPECT_EQ(m.find("/autograd/"), std::string::npos) << m;
  }
}

}  // namespace
