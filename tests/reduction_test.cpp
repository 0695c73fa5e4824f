// float32 reductions accumulate in double: a float running sum stops growing at 2^24 once its
// increments fall below half an ulp (2e7 ones sum to 16777216 in float). Every case here sums
// exactly representable values whose exact total is representable in float, or compares with
// the exact total rounded once to float, so the result must be exact; a float accumulator gets
// each of them wrong.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <tapegrad/ops/ops.h>

namespace tg {
namespace {

constexpr int64_t kN = 20'000'000;  // past 2^24 = 16,777,216
constexpr double kBig = 16777216.0;  // 2^24: in float, 2^24 + 1 rounds back to 2^24

TEST(Reduction, Float32SumOfManyOnesIsExact) {
  const Tensor X = ones({kN}, Dtype::f32);
  EXPECT_EQ(sum(X).item(), 2e7);
  EXPECT_EQ(sum(X, 0).item(), 2e7);
  EXPECT_EQ(sum(reshape(X, {kN, 1}), 0).item(), 2e7);      // along an axis: (N, 1) -> (1,)
  EXPECT_EQ(sum(reshape(X, {1, kN}), 1).at({0}), 2e7);      // along the last axis: (1, N)
  EXPECT_EQ(sum_of_squares(X).item(), 2e7);
}

TEST(Reduction, Float32SumToOfManyOnesIsExact) {
  const Tensor X = ones({kN, 1}, Dtype::f32);
  EXPECT_EQ(sum_to(X, {1, 1}).item(), 2e7);
  EXPECT_EQ(sum_to(X, {1}).item(), 2e7);
  EXPECT_EQ(sum_to(X, {}).item(), 2e7);
}

// A broadcast's backward sums the gradient down to the broadcast input (through sum_to).
TEST(Reduction, Float32BroadcastBackwardIsExact) {
  const Tensor b = zeros({kN}, Dtype::f32);
  const Tensor a = scalar(0.0, Dtype::f32).set_requires_grad();
  add(b, a).backward(ones({kN}, Dtype::f32));
  EXPECT_EQ(a.grad().item(), 2e7);
}

// Columns of 2^24 then ones: a float accumulator stays at 2^24. Exercises the column sums
// (several outputs at once: 3 columns; 40, 32 of them summed side by side in registers and 8
// after them; 1100, past a block of 1024) and sum_to's general path (a trailing axis summed).
void expect_exact_column_sums(int64_t C) {
  SCOPED_TRACE(std::to_string(C) + " columns");
  constexpr int64_t R = 1001;
  std::vector<double> v(R * C, 1.0);
  for (int64_t c = 0; c < C; ++c) v[c] = kBig;
  const Tensor X = from_vector(v, {R, C}).to(Dtype::f32);  // (R, C)
  const double exact = kBig + (R - 1);                     // even, so a float holds it
  const Tensor by_axis = sum(X, 0);                        // (C,)
  const Tensor by_sum_to = sum_to(X, {1, C});              // (1, C)
  const Tensor by_rows = sum_to(transpose(X), {C, 1});     // (C, 1): the general path
  for (int64_t c = 0; c < C; ++c) {
    SCOPED_TRACE("column " + std::to_string(c));
    EXPECT_EQ(by_axis.at({c}), exact);
    EXPECT_EQ(by_sum_to.at({0, c}), exact);
    EXPECT_EQ(by_rows.at({c, 0}), exact);
  }
  const Tensor S = from_vector(v, {R * C}).to(Dtype::f32);
  // the exact total, rounded once to float32 (1100 columns' is past float's 24 bits)
  EXPECT_EQ(sum(S).item(), static_cast<float>(C * kBig + C * (R - 1)));
}

TEST(Reduction, Float32ColumnSumsAreExact) {
  expect_exact_column_sums(3);
  expect_exact_column_sums(40);
  expect_exact_column_sums(1100);
}

}  // namespace
}  // namespace tg
