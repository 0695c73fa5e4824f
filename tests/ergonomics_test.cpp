// What a C++ user expects of tensors: operators, scalars in the tensor's dtype, *_like, element
// writes, ops as function values that still name the caller's line, and calls that read like
// PyTorch's (softmax(x, -1), transpose(x, 0, 1), sum(x, {0, 2}, true), cross_entropy options).

#include <gtest/gtest.h>

#include <cmath>
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
  Tensor v = x.detach().clone().set_requires_grad();
  const Tensor y = tg::fn::exp(v);  // a direct call records this line
  const int line = __LINE__ - 1;
  EXPECT_EQ(y.impl().grad_fn->where.line(), static_cast<unsigned>(line));
  EXPECT_NE(std::string(y.impl().grad_fn->where.file_name()).find("ergonomics_test"),
            std::string::npos);
}

// 0, 1, 2, ... in `shape`.
Tensor iota(const tg::Shape& shape) {
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return tg::from_vector(v, shape);
}

// The calls as a PyTorch user writes them compile, pick the overload meant, and give PyTorch's
// values (against tests/ops_reference.py in ops_torch_test; here against the one-axis forms).
TEST(PyTorchStyle, SoftmaxAndLogSoftmaxTakeADim) {
  tg::Rng rng(3);
  const Tensor x = tg::randn({2, 3, 4}, rng);
  EXPECT_EQ(tg::softmax(x, -1).to_vector(), tg::softmax(x).to_vector());
  EXPECT_EQ(tg::log_softmax(x, 2).to_vector(), tg::log_softmax(x).to_vector());
  EXPECT_EQ(tg::fn::softmax(x, -1).to_vector(), tg::softmax(x).to_vector());
  // Along axis 1: each (b, :, k) column sums to 1 and equals the last-axis softmax of the
  // transposed tensor.
  const Tensor s1 = tg::softmax(x, 1), l1 = tg::log_softmax(x, -2);
  EXPECT_EQ(s1.shape(), x.shape());
  const Tensor col = tg::sum(s1, 1);
  for (double v : col.to_vector()) EXPECT_NEAR(v, 1.0, 1e-15);
  const Tensor ref = tg::transpose(tg::softmax(tg::transpose(x, 1, 2)), 1, 2);
  const Tensor lref = tg::transpose(tg::log_softmax(tg::transpose(x, 1, 2)), 1, 2);
  const auto a = s1.to_vector(), b = ref.to_vector(), la = l1.to_vector(), lb = lref.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-15);
    EXPECT_NEAR(la[i], lb[i], 1e-14);
  }
}

TEST(PyTorchStyle, TransposeTakesTwoDims) {
  const Tensor x = iota({2, 3, 4});
  const Tensor y = tg::transpose(x, 0, 1);
  EXPECT_EQ(y.shape(), tg::Shape({3, 2, 4}));
  EXPECT_EQ(y.at({2, 1, 3}), x.at({1, 2, 3}));
  const Tensor z = tg::transpose(x, -1, 0);
  EXPECT_EQ(z.shape(), tg::Shape({4, 3, 2}));
  EXPECT_EQ(z.at({3, 1, 0}), x.at({0, 1, 3}));
  EXPECT_EQ(tg::transpose(x, -1, -2).to_vector(), tg::transpose(x).to_vector());
  EXPECT_EQ(tg::transpose(x, 1, 1).to_vector(), x.to_vector());
}

TEST(PyTorchStyle, SumAndMeanOverSeveralDims) {
  const Tensor x = iota({2, 3, 4});
  // A braced list of two or more dims is the several-dims form; {d} and d are the one-axis form.
  const Tensor s02 = tg::sum(x, {0, 2});
  EXPECT_EQ(s02.shape(), tg::Shape({3}));
  EXPECT_EQ(s02.to_vector(), (std::vector<double>{60, 92, 124}));
  EXPECT_EQ(tg::sum(x, {0, 2}, true).shape(), tg::Shape({1, 3, 1}));
  EXPECT_EQ(tg::sum(x, {-1, 0}, true).to_vector(), s02.to_vector());
  EXPECT_EQ(tg::sum(x, {1}).to_vector(), tg::sum(x, 1).to_vector());
  EXPECT_EQ(tg::sum(x, {1}, true).shape(), tg::Shape({2, 1, 4}));
  EXPECT_EQ(tg::sum(x, std::vector<int>{}).item(), 276.0);  // an empty list: every axis
  EXPECT_EQ(tg::sum(x, std::vector<int>{}, true).shape(), tg::Shape({1, 1, 1}));
  EXPECT_EQ(tg::mean(x, {0, 2}).to_vector(), (std::vector<double>{7.5, 11.5, 15.5}));
  EXPECT_EQ(tg::mean(x, {0, 1, 2}, true).shape(), tg::Shape({1, 1, 1}));
  EXPECT_EQ(tg::mean(x, {0, 1, 2}).item(), 11.5);
  // float32 accumulates in double across the reduced axes too.
  const Tensor ones = tg::ones({4096, 4097}, tg::Dtype::f32);
  EXPECT_EQ(tg::sum(ones, {0, 1}).item(), 4096.0 * 4097.0);
}

TEST(PyTorchStyle, CrossEntropyTakesPyTorchsKeywords) {
  const Tensor x = tg::zeros({2, 3, 4});  // (B, T, V), every class at probability 1/4
  const Tensor t = tg::from_indices({0, 1, -100, 3, -1, 2}, {2, 3});
  // -100 is ignored by default; -1 is not a class, so it must be ignored explicitly.
  EXPECT_THROW(tg::cross_entropy(x, t), tg::ValueError);
  const Tensor t100 = tg::from_indices({0, 1, -100, 3, 2, 2}, {2, 3});
  EXPECT_NEAR(tg::cross_entropy(x, t100).item(), std::log(4.0), 1e-15);
  const Tensor t1 = tg::from_indices({0, 1, -1, 3, -1, 2}, {2, 3});
  EXPECT_NEAR(tg::cross_entropy(x, t1, -1).item(), std::log(4.0), 1e-15);
  EXPECT_NEAR(tg::cross_entropy(x, t1, {.ignore_index = -1}).item(), std::log(4.0), 1e-15);
  // Equal logits: smoothing and weights do not move the loss off log V.
  const Tensor w = tg::from_vector({1.0, 2.0, 0.5, 4.0}, {4}).to(x.dtype());
  EXPECT_NEAR(tg::cross_entropy(x, t1, {.weight = w, .ignore_index = -1, .label_smoothing = 0.2})
                  .item(),
              std::log(4.0), 1e-15);
}

}  // namespace

namespace {

// PyTorch's habits: to() and clone() stay on the tape (detach() is the way to cut it).
TEST(PyTorchHabits, ToAndCloneAreDifferentiable) {
  // sum(x*x) + sum(x.to(f32).to(f64) * 3): PyTorch gives x.grad = 2 x + 3 = [5, 7] at x = [1, 2].
  Tensor x = tg::from_vector({1.0, 2.0}, {2}, tg::Dtype::f64).set_requires_grad();
  const Tensor round_trip = x.to(tg::Dtype::f32).to(tg::Dtype::f64);
  EXPECT_EQ(round_trip.op_name(), "to");
  (tg::sum(x * x) + tg::sum(round_trip * 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{5.0, 7.0}));

  Tensor y = tg::from_vector({1.0, 2.0}, {2}, tg::Dtype::f64).set_requires_grad();
  (tg::sum(y * y) + tg::sum(y.clone() * 3.0)).backward();
  EXPECT_EQ(y.grad().to_vector(), (std::vector<double>{5.0, 7.0}));

  // detach() cuts: only sum(z*z) reaches z.
  Tensor z = tg::from_vector({1.0, 2.0}, {2}, tg::Dtype::f64).set_requires_grad();
  (tg::sum(z * z) + tg::sum(z.detach().clone() * 3.0)).backward();
  EXPECT_EQ(z.grad().to_vector(), (std::vector<double>{2.0, 4.0}));

  // A float32 gradient comes back as float32; an int64 copy is off the tape.
  Tensor w = tg::from_vector({0.5, -1.5}, {2}, tg::Dtype::f32).set_requires_grad();
  tg::sum(w.to(tg::Dtype::f64) * 2.0).backward();
  EXPECT_EQ(w.grad().dtype(), tg::Dtype::f32);
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{2.0, 2.0}));
  EXPECT_FALSE(w.to(tg::Dtype::i64).requires_grad());

  // (A round trip through float32 would make central differences of 1e-6 meaningless.)
  const auto f = [](const std::vector<Tensor>& v) {
    return tg::mul(v[0].to(tg::Dtype::f64).clone(), tg::exp(v[0].clone()));
  };
  tg::Rng rng(3);
  EXPECT_TRUE(tg::gradcheck(f, {tg::randn({3}, rng, tg::Dtype::f64)}).passed);
  EXPECT_TRUE(tg::gradgradcheck(f, {tg::randn({3}, rng, tg::Dtype::f64)}).passed);
}

// int64 tensors hold indices: they cannot require grad (PyTorch refuses it too).
TEST(PyTorchHabits, Int64TensorsCannotRequireGrad) {
  Tensor idx = tg::from_indices({0, 2, 1}, {3});
  try {
    idx.set_requires_grad();
    FAIL() << "expected a tg::ValueError";
  } catch (const tg::ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("set_requires_grad"), std::string::npos) << m;
    EXPECT_NE(m.find("int64"), std::string::npos) << m;
  }
  EXPECT_FALSE(idx.requires_grad());
  EXPECT_NO_THROW(idx.set_requires_grad(false));
}

}  // namespace
