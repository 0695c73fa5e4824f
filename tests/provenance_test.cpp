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
