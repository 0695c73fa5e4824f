// Forward values against hand-computed ones. The tape (accumulation, detach, grad mode,
// retain_graph, create_graph, long chains, threads, the caching allocator) is in backward_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/storage.h>
#include <tapegrad/ops/ops.h>

namespace {

using tg::Tensor;
using V = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor leaf(const V& v, const tg::Shape& s) { return tg::from_vector(v, s).set_requires_grad(); }

// ---- forward values ----------------------------------------------------------------------------

TEST(Matmul, SmallIntegerMatrices) {
  const Tensor A = tg::from_vector({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor B = tg::from_vector({1, 0, -1, 2, 1, 0}, {2, 3});
  const V AB = {5, 2, -1, 11, 4, -3, 17, 6, -5};
  EXPECT_EQ(tg::matmul(A, B).shape(), tg::Shape({3, 3}));
  EXPECT_EQ(tg::matmul(A, B).to_vector(), AB);
  const Tensor At = tg::from_vector({1, 3, 5, 2, 4, 6}, {2, 3});   // A^T stored
  const Tensor Bt = tg::from_vector({1, 2, 0, 1, -1, 0}, {3, 2});  // B^T stored
  EXPECT_EQ(tg::matmul(At, B, true, false).to_vector(), AB);
  EXPECT_EQ(tg::matmul(A, Bt, false, true).to_vector(), AB);
  EXPECT_EQ(tg::matmul(At, Bt, true, true).to_vector(), AB);
}

TEST(Matmul, BatchedAndBroadcast) {
  // (2, 1, 2) @ (2, 2): [1 2] W = [1 5], [3 4] W = [3 11].
  const Tensor X = tg::from_vector({1, 2, 3, 4}, {2, 1, 2});
  const Tensor W = tg::from_vector({1, 1, 0, 2}, {2, 2});
  EXPECT_EQ(tg::matmul(X, W).shape(), tg::Shape({2, 1, 2}));
  EXPECT_EQ(tg::matmul(X, W).to_vector(), V({1, 5, 3, 11}));
  // (2, 1, 1, 2) @ (2, 2, 1) -> (2, 2, 1, 1): Y[i][j] = a_i . b_j.
  const Tensor a = tg::from_vector({1, 2, 3, 4}, {2, 1, 1, 2});
  const Tensor b = tg::from_vector({1, 0, 0, 1}, {2, 2, 1});
  const Tensor Y = tg::matmul(a, b);
  EXPECT_EQ(Y.shape(), tg::Shape({2, 2, 1, 1}));
  EXPECT_EQ(Y.to_vector(), V({1, 2, 3, 4}));
}

TEST(Softmax, MaskedEntryIsExactlyZero) {
  const Tensor y = tg::softmax(tg::from_vector({0, std::log(2.0), -kInf}, {3}));
  EXPECT_NEAR(y.at({0}), 1.0 / 3, 1e-15);
  EXPECT_NEAR(y.at({1}), 2.0 / 3, 1e-15);
  EXPECT_EQ(y.at({2}), 0.0);
}

TEST(Softmax, RowsSumToOneEvenWithLargeLogits) {
  const Tensor y =
      tg::softmax(tg::from_vector({1000, 1000, -1000, 1e4, 1e4 + std::log(3.0), 0}, {2, 3}));
  EXPECT_EQ(y.to_vector()[0], 0.5);
  EXPECT_EQ(y.to_vector()[1], 0.5);
  EXPECT_EQ(y.to_vector()[2], 0.0);
  EXPECT_NEAR(y.at({1, 0}), 0.25, 1e-12);
  EXPECT_NEAR(y.at({1, 1}), 0.75, 1e-12);
}

TEST(Softmax, FullyMaskedRowIsZeroWithZeroGradient) {
  const Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  const Tensor M = tg::from_vector({-kInf, -kInf, 0, 0}, {2, 2});
  const Tensor y = tg::softmax(tg::add_mask(x, M));
  EXPECT_EQ(y.at({0, 0}), 0.0);
  EXPECT_EQ(y.at({0, 1}), 0.0);
  tg::sum(tg::mul(y, tg::from_vector({1, 2, 3, 5}, {2, 2}))).backward();
  const V g = x.grad().to_vector();
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  // Row 1: p = softmax(3, 4), dL/dx = p * (w - p.w), w = (3, 5): not zero, and sums to zero.
  EXPECT_GT(std::fabs(g[2]), 0.1);
  EXPECT_NEAR(g[2] + g[3], 0.0, 1e-15);
}

TEST(Transpose, PlacesElements) {
  const Tensor y =
      tg::transpose(tg::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3}));
  EXPECT_EQ(y.shape(), tg::Shape({2, 3, 2}));
  EXPECT_EQ(y.to_vector(), V({1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12}));
}

TEST(Permute, PlacesElements) {
  V v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;  // X[i][j][k] = 12 i + 4 j + k
  const Tensor y = tg::permute(tg::from_vector(v, {2, 3, 4}), {2, 0, 1});
  ASSERT_EQ(y.shape(), tg::Shape({4, 2, 3}));
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.at({k, i, j}), 12 * i + 4 * j + k);
}

TEST(Reshape, KeepsRowMajorOrder) {
  const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor y = tg::reshape(x, {3, -1});
  EXPECT_EQ(y.shape(), tg::Shape({3, 2}));
  EXPECT_EQ(y.at({2, 0}), 5);
  EXPECT_EQ(tg::reshape(x, {1, 6, 1}).at({0, 4, 0}), 5);
  EXPECT_EQ(tg::reshape(tg::scalar(7), {1, 1}).at({0, 0}), 7);
}

TEST(Sum, AllAndAlongAxis) {
  const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(tg::sum(x).item(), 21);
  EXPECT_EQ(tg::sum(x).rank(), 0);
  EXPECT_EQ(tg::sum(x, 0).to_vector(), V({5, 7, 9}));
  EXPECT_EQ(tg::sum(x, 0).shape(), tg::Shape({3}));
  EXPECT_EQ(tg::sum(x, 1, true).shape(), tg::Shape({2, 1}));
  EXPECT_EQ(tg::sum(x, 1, true).to_vector(), V({6, 15}));
  EXPECT_EQ(tg::sum(x, -1).to_vector(), V({6, 15}));
}

TEST(SumTo, InvertsBroadcastTo) {
  const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(tg::sum_to(x, {3}).to_vector(), V({5, 7, 9}));
  EXPECT_EQ(tg::sum_to(x, {2, 1}).to_vector(), V({6, 15}));
  EXPECT_EQ(tg::sum_to(x, {}).item(), 21);
  EXPECT_EQ(tg::broadcast_to(tg::from_vector({1, 2, 3}, {3}), {2, 3}).to_vector(),
            V({1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(tg::broadcast_to(tg::from_vector({1, 2}, {2, 1}), {2, 3}).to_vector(),
            V({1, 1, 1, 2, 2, 2}));
}

TEST(AddMask, BroadcastsOverLeadingAxes) {
  const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  const Tensor y = tg::add_mask(x, tg::causal_mask(2));
  EXPECT_EQ(y.to_vector(), V({1, -kInf, 3, 4, 5, -kInf, 7, 8}));
  // Window 2 on T = 3: row 2 sees positions 1 and 2 only.
  EXPECT_EQ(tg::causal_mask(3, tg::Dtype::f64, 2).to_vector(),
            V({0, -kInf, -kInf, 0, 0, -kInf, -kInf, 0, 0}));
}

TEST(SumOfSquares, SmallVector) {
  EXPECT_EQ(tg::sum_of_squares(tg::from_vector({1, -2, 3}, {3})).item(), 14);
}

TEST(Rope, RotatesPairsByPosition) {
  // d_h = 2: theta_0 = 1, so position m rotates by m radians; position 0 is the identity.
  const Tensor y = tg::rope(tg::from_vector({1, 2, 1, 2}, {2, 2}));
  EXPECT_EQ(y.at({0, 0}), 1);
  EXPECT_EQ(y.at({0, 1}), 2);
  EXPECT_NEAR(y.at({1, 0}), std::cos(1.0) - 2 * std::sin(1.0), 1e-15);
  EXPECT_NEAR(y.at({1, 1}), std::sin(1.0) + 2 * std::cos(1.0), 1e-15);
}

// Q = (1, 1), K = (0, ln 2), V = (3, 6), scale 1: row 0 sees key 0 only, O_0 = 3; row 1 has
// scores (0, ln 2), weights (1/3, 2/3), O_1 = 1 + 4 = 5.
TEST(CausalAttention, SmallHandComputedCase) {
  const Tensor Q = tg::from_vector({1, 1}, {2, 1}), K = tg::from_vector({0, std::log(2.0)}, {2, 1});
  const Tensor V = tg::from_vector({3, 6}, {2, 1});
  for (const Tensor& O :
       {tg::causal_attention(Q, K, V, 1.0), tg::causal_attention_composed(Q, K, V, 1.0)}) {
    EXPECT_NEAR(O.at({0, 0}), 3, 1e-14);
    EXPECT_NEAR(O.at({1, 0}), 5, 1e-14);
  }
  EXPECT_NEAR(tg::causal_attention(Q, K, V, 1.0, /*window=*/1).at({1, 0}), 6, 1e-14);  // O = V
  // Row 1 alone, after one cached key: query_offset 1 makes it position 1, O = 5 again.
  const Tensor q1 = tg::from_vector({1}, {1, 1});
  for (const Tensor& O : {tg::causal_attention(q1, K, V, 1.0, 0, /*query_offset=*/1),
                          tg::causal_attention_composed(q1, K, V, 1.0, 0, 1)})
    EXPECT_NEAR(O.at({0, 0}), 5, 1e-14);
}

}  // namespace
