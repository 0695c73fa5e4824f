// What a C++ user expects of tensors: operators, scalars in the tensor's dtype, *_like, element
// writes, ops as function values that still name the caller's line.

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

namespace {

using tg::Tensor;

TEST(Operators, MatchTheNamedOps) {
  tg::Rng rng(1);
  const Tensor a = tg::randn({2, 3}, rng), b = tg::uniform({3}, rng, 0.5, 2.0);
  EXPECT_EQ((a + b).to_vector(), tg::add(a, b).to_vector());
  EXPECT_EQ((a - b).to_vector(), tg::sub(a, b).to_vector());
  EXPECT_EQ((a * b).to_vector(), tg::mul(a, b).to_vector());
  EXPECT_EQ((a / b).to_vector(), tg::div(a, b).to_vector());
  EXPECT_EQ((-a).to_vector(), tg::scale(a, -1.0).to_vector());
  const std::vector<double> x = a.to_vector();
  const std::vector<double> y = (2.0 * a + 1.0 - a / 4.0).to_vector();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_DOUBLE_EQ(y[i], 2.0 * x[i] + 1.0 - x[i] / 4.0);
  const std::vector<double> z = (1.0 - a).to_vector(), r = (1.0 / b).to_vector();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_DOUBLE_EQ(z[i], 1.0 - x[i]);
  EXPECT_DOUBLE_EQ(r[0], 1.0 / b.at({0}));
}

TEST(Operators, AreDifferentiable) {
  tg::Rng rng(2);
  const Tensor a = tg::randn({3}, rng), b = tg::uniform({3}, rng, 0.5, 2.0);
  auto f = [](const std::vector<Tensor>& x) {
    return tg::sum_of_squares((x[0] * x[1] - x[0] / x[1]) * 3.0 + (-x[1]) - 2.0);
  };
  EXPECT_TRUE(tg::gradcheck(f, {a, b}).passed);
}

TEST(Scalars, TakeTheTensorsDtype) {
  const Tensor x = tg::ones({2}, tg::Dtype::f32);
  for (const Tensor& y : {tg::mul(x, 2.0), tg::add(x, 2.0), tg::sub(x, 2.0), tg::div(x, 2.0),
                          tg::sub(2.0, x), tg::div(2.0, x), x * 2.0, 2.0 + x}) {
    EXPECT_EQ(y.dtype(), tg::Dtype::f32);
  }
  EXPECT_EQ(tg::div(x, 4.0).to_vector(), (std::vector<double>{0.25, 0.25}));
}

TEST(Like, ZerosAndOnesLike) {
  const Tensor x = tg::ones({2, 3}, tg::Dtype::f32);
  const Tensor z = tg::zeros_like(x), o = tg::ones_like(x);
  EXPECT_EQ(z.shape(), x.shape());
  EXPECT_EQ(z.dtype(), tg::Dtype::f32);
  EXPECT_EQ(z.to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(o.to_vector(), std::vector<double>(6, 1.0));
}

TEST(ElementWrite, SetWritesOneElementAndChecksTheIndex) {
  Tensor x = tg::zeros({2, 2});
  x.set({1, 0}, 3.5);
  EXPECT_EQ(x.to_vector(), (std::vector<double>{0, 0, 3.5, 0}));
  EXPECT_THROW(x.set({2, 0}, 1.0), tg::ShapeError);
  EXPECT_THROW(x.set({0}, 1.0), tg::ShapeError);
  Tensor i = tg::from_indices({1, 2, 3}, {3});
  i.set({0}, 7);
  EXPECT_EQ(i.at({0}), 7.0);
}

TEST(FunctionValues, OpsPassAsFunctionsAndNameTheCaller) {
  const std::vector<std::function<Tensor(const Tensor&)>> fs = {tg::fn::exp, tg::fn::tanh,
                                                                tg::fn::softmax, tg::fn::relu};
  const Tensor x = tg::from_vector({0.5, -1.0}, {2});
  EXPECT_DOUBLE_EQ(fs[0](x).at({0}), std::exp(0.5));
  EXPECT_DOUBLE_EQ(fs[1](x).at({1}), std::tanh(-1.0));
  EXPECT_EQ(fs[3](x).to_vector(), (std::vector<double>{0.5, 0.0}));
  Tensor v = x.clone().set_requires_grad();
  const Tensor y = tg::fn::exp(v);  // a direct call records this line
  const int line = __LINE__ - 1;
  EXPECT_EQ(y.impl().grad_fn->where.line(), static_cast<unsigned>(line));
  EXPECT_NE(std::string(y.impl().grad_fn->where.file_name()).find("ergonomics_test"),
            std::string::npos);
}

}  // namespace
