// Module buffers (names, PyTorch's state-dict order, loading, no gradients, a safetensors
// round trip with the int64 num_batches_tracked) and the normalisation ops and layers against
// plain loops: batch_norm's batch statistics, running-statistics update and evaluation mode,
// group_norm's groups, the layers' modes and errors; a negative control (a batch_norm gradient
// that treats the batch statistics as constants) fails gradcheck. PyTorch itself is in
// layers_torch_test.cpp and ops_torch_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/norm.h>
#include <tapegrad/ops/ops.h>
#include "nn_util.h"
#include "test_util.h"

namespace tg::nn {
namespace {

using test::expect_throws;
using test::max_abs_diff;
using test::names;

// A tree with parameters and buffers registered in a mixed order: PyTorch's state dict lists
// a module's own parameters, then its own buffers, then each child's entries.
struct Inner : Module {
  Inner() {
    register_buffer("count", count);
    register_parameter("w", w);
  }
  Tensor count = zeros(Shape{}, Dtype::i64);
  Tensor w = zeros({2}, Dtype::f64);
};
struct Outer : Module {
  Outer() {
    register_parameter("p1", p1);
    register_module("inner", inner);
    register_buffer("buf", buf);
    register_parameter("p2", p2);
  }
  Tensor p1 = zeros({3}, Dtype::f64), p2 = zeros({1}, Dtype::f64), buf = ones({2, 2}, Dtype::f64);
  Inner inner;
};

TEST(Buffers, StateDictOrderIsPyTorchs) {
  const Outer m;
  EXPECT_EQ(names(m.state_dict()),
            (std::vector<std::string>{"p1", "p2", "buf", "inner.w", "inner.count"}));
  EXPECT_EQ(names(m.named_parameters()), (std::vector<std::string>{"p1", "p2", "inner.w"}));
  EXPECT_EQ(names(m.named_buffers()), (std::vector<std::string>{"buf", "inner.count"}));
  EXPECT_EQ(m.parameters().size(), 3u);
  EXPECT_EQ(m.num_parameters(), 6);
  EXPECT_EQ(m.state_dict()[2].second.impl_ptr(), m.buf.impl_ptr());  // shared, as PyTorch's
  EXPECT_FALSE(m.buf.requires_grad());
}

TEST(Buffers, LoadStateDictLoadsThemStrictly) {
  Outer m;
  NamedTensors s = m.state_dict();
  s[2].second = full({2, 2}, 7, Dtype::f64);
  s[4].second = full(Shape{}, 9, Dtype::i64);
  const uint64_t version = m.buf.version();
  m.load_state_dict(s);
  EXPECT_EQ(m.buf.to_vector(), std::vector<double>(4, 7.0));
  EXPECT_EQ(m.inner.count.item(), 9.0);
  EXPECT_GT(m.buf.version(), version);
  NamedTensors missing = m.state_dict();
  missing.erase(missing.begin() + 4);
  expect_throws<ValueError>([&] { m.load_state_dict(missing); }, {"missing entry 'inner.count'"});
  NamedTensors wrong = m.state_dict();
  wrong[4].second = zeros(Shape{}, Dtype::f64);
  expect_throws<ValueError>([&] { m.load_state_dict(wrong); },
                            {"'inner.count' is () float64", "() int64"});
  EXPECT_EQ(m.inner.count.item(), 9.0);  // nothing copied by a failed load
}

TEST(Buffers, RegisterBufferRefusesBadNamesAndGradients) {
  struct Bad : Module {
    void add(const std::string& name, Tensor& t) { register_buffer(name, t); }
    void param(const std::string& name, Tensor& t) { register_parameter(name, t); }
    Tensor a = zeros({2}, Dtype::f64), b = zeros({2}, Dtype::f64), c;
  } m;
  m.param("a", m.a);
  expect_throws<ValueError>([&] { m.add("a", m.b); }, {"register_buffer", "'a'", "already"});
  expect_throws<ValueError>([&] { m.add("x.y", m.b); }, {"register_buffer", "dot"});
  expect_throws<ValueError>([&] { m.add("c", m.c); }, {"register_buffer", "'c'", "defined"});
  expect_throws<ValueError>([&] { m.add("a2", m.a); }, {"register_buffer", "'a2'", "requires grad"});
  m.add("b", m.b);
  expect_throws<ValueError>([&] { m.param("b", m.a); }, {"register_parameter", "'b'", "already"});
}

TEST(Buffers, BatchNormStateRoundTripsThroughSafetensors) {
  Rng rng(3);
  BatchNorm2d a(3, {}, Dtype::f64), b(3, {}, Dtype::f64);
  for (int step = 0; step < 2; ++step) a(randn({2, 3, 2, 2}, rng, Dtype::f64));
  EXPECT_EQ(a.num_batches_tracked.item(), 2.0);
  const test::TempDir tmp;
  write_safetensors(tmp.file("model.safetensors"), a.state_dict(), {});
  const SafeTensors read = read_safetensors(tmp.file("model.safetensors"));
  b.load_state_dict(read.tensors);
  EXPECT_EQ(b.num_batches_tracked.dtype(), Dtype::i64);
  EXPECT_EQ(b.num_batches_tracked.item(), 2.0);
  EXPECT_EQ(max_abs_diff(b.running_mean, a.running_mean), 0.0);
  EXPECT_EQ(max_abs_diff(b.running_var, a.running_var), 0.0);
  EXPECT_GT(max_abs_diff(b.running_var, ones({3}, Dtype::f64)), 1e-3);
}

TEST(Buffers, NeverGetGradients) {
  Rng rng(4);
  BatchNorm1d bn(2, {}, Dtype::f64);
  const Tensor x = randn({5, 2}, rng, Dtype::f64).set_requires_grad();
  sum(mul(bn(x), randn({5, 2}, rng, Dtype::f64))).backward();
  EXPECT_TRUE(bn.weight.grad().defined());
  EXPECT_TRUE(x.grad().defined());
  for (const auto& [name, t] : bn.named_buffers()) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(t.requires_grad());
    EXPECT_FALSE(t.grad().defined());
  }
  EXPECT_EQ(names(bn.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
}

// ---- the ops against loops --------------------------------------------------------------------

// x (N, C, S) by loops: per channel mean and biased variance.
std::pair<std::vector<double>, std::vector<double>> channel_stats(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
  const std::vector<double> v = x.to_vector();
  std::vector<double> mean(C, 0.0), var(C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) mean[c] += v[(n * C + c) * S + s] / static_cast<double>(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s)
        var[c] += std::pow(v[(n * C + c) * S + s] - mean[c], 2) / static_cast<double>(N * S);
  }
  return {mean, var};
}

TEST(BatchNormOp, TrainingNormalisesAndUpdatesTheRunningStats) {
  Rng rng(5);
  const Tensor x = randn({4, 3, 5}, rng, Dtype::f64), w = randn({3}, rng, Dtype::f64),
               b = randn({3}, rng, Dtype::f64);
  const Tensor rm = from_vector({0.5, -1, 2}, {3}, Dtype::f64), rv = from_vector({1, 2, 0.5}, {3}, Dtype::f64);
  const uint64_t version = rm.version();
  const Tensor y = batch_norm(x, rm, rv, w, b, true, 0.25, 1e-3);
  EXPECT_GT(rm.version(), version);
  const auto [mean, var] = channel_stats(x);
  const std::vector<double> xv = x.to_vector(), yv = y.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 5) % 3;
    EXPECT_NEAR(yv[i], (xv[i] - mean[c]) / std::sqrt(var[c] + 1e-3) * wv[c] + bv[c], 1e-12);
  }
  const std::vector<double> rm0 = {0.5, -1, 2}, rv0 = {1, 2, 0.5};
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(rm.to_vector()[c], 0.75 * rm0[c] + 0.25 * mean[c], 1e-14);
    EXPECT_NEAR(rv.to_vector()[c], 0.75 * rv0[c] + 0.25 * var[c] * 20.0 / 19.0, 1e-14);  // unbiased
  }
}

TEST(BatchNormOp, EvaluationUsesTheRunningStatsAndLeavesThem) {
  Rng rng(6);
  const Tensor x = randn({2, 2, 3, 2}, rng, Dtype::f64).set_requires_grad();
  const Tensor rm = from_vector({0.5, -1}, {2}, Dtype::f64), rv = from_vector({1, 2}, {2}, Dtype::f64);
  const Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), false);
  EXPECT_EQ(rm.to_vector(), (std::vector<double>{0.5, -1}));
  EXPECT_EQ(rv.to_vector(), (std::vector<double>{1, 2}));
  const std::vector<double> xv = x.to_vector(), yv = y.to_vector();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 6) % 2;
    EXPECT_NEAR(yv[i], (xv[i] - rm.to_vector()[c]) / std::sqrt(rv.to_vector()[c] + 1e-5), 1e-12);
  }
  // The evaluation backward keeps the stats of its call: a later update does not change it.
  const Tensor w = randn(y.shape(), rng, Dtype::f64);
  const Tensor L = sum(mul(y, w));
  batch_norm(x.detach(), rm, rv, Tensor(), Tensor(), true);
  L.backward();
  const std::vector<double> dx = x.grad().to_vector(), wv = w.to_vector();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 6) % 2;
    EXPECT_NEAR(dx[i], wv[i] / std::sqrt((c ? 2.0 : 1.0) + 1e-5), 1e-12);
  }
}

TEST(BatchNormOp, GradcheckFailsWhenTheBatchStatsAreTakenAsConstants) {
  Rng rng(7);
  const Tensor x = randn({4, 2}, rng, Dtype::f64).set_requires_grad();
  const Function right = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true)};
  };
  // The forward of batch_norm, with evaluation's backward r dY: wrong in training.
  const Function wrong = [](const std::vector<Tensor>& in) {
    const Tensor X = in[0];
    const Tensor Xc = sub(X.detach(), mean(X.detach(), 0, true));
    const Tensor r = rsqrt(add(mean(mul(Xc, Xc), 0, true), 1e-5));
    const Tensor Y = batch_norm(X.detach(), Tensor(), Tensor(), Tensor(), Tensor(), true);
    return std::vector<Tensor>{
        record("batch_norm_constant_stats", Y, {X}).formula([r](const Tensor& dY) -> Grads {
          return {mul(dY, r)};
        })};
  };
  EXPECT_TRUE(gradcheck(right, {x}).passed);
  EXPECT_FALSE(gradcheck(wrong, {x}).passed);
}

TEST(GroupNormOp, NormalisesEachSamplesGroupByLoops) {
  Rng rng(8);
  const int64_t N = 2, C = 6, G = 3, S = 4;
  const Tensor x = randn({N, C, S}, rng, Dtype::f64), w = randn({C}, rng, Dtype::f64),
               b = randn({C}, rng, Dtype::f64);
  const std::vector<double> y = group_norm(x, G, w, b).to_vector(), xv = x.to_vector(),
                            wv = w.to_vector(), bv = b.to_vector();
  const int64_t M = C / G * S;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < M; ++k) mean += xv[(n * G + g) * M + k] / M;
      for (int64_t k = 0; k < M; ++k) var += std::pow(xv[(n * G + g) * M + k] - mean, 2) / M;
      for (int64_t k = 0; k < M; ++k) {
        const int64_t i = (n * G + g) * M + k, c = g * (C / G) + k / S;
        EXPECT_NEAR(y[i], (xv[i] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c], 1e-12);
      }
    }
}

// ---- the layers -------------------------------------------------------------------------------

TEST(BatchNorm, TrainCountsAndUpdatesEvalDoesNot) {
  Rng rng(9);
  BatchNorm1d bn(3, {}, Dtype::f64);
  EXPECT_EQ(names(bn.state_dict()), (std::vector<std::string>{"weight", "bias", "running_mean",
                                                              "running_var", "num_batches_tracked"}));
  EXPECT_EQ(bn.running_var.to_vector(), std::vector<double>(3, 1.0));
  bn(randn({4, 3}, rng, Dtype::f64));
  bn(randn({4, 3, 2}, rng, Dtype::f64));
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
  const std::vector<double> mean = bn.running_mean.to_vector();
  EXPECT_NE(mean, std::vector<double>(3, 0.0));
  bn.eval();
  const Tensor x = randn({2, 3}, rng, Dtype::f64);
  const Tensor y = bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
  EXPECT_EQ(bn.running_mean.to_vector(), mean);
  EXPECT_EQ(max_abs_diff(y, batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, false)), 0.0);
}

TEST(BatchNorm, NoAffineHasNoParameters) {
  BatchNorm2d bn(2, {.affine = false}, Dtype::f64);
  EXPECT_TRUE(bn.named_parameters().empty());
  EXPECT_EQ(names(bn.state_dict()),
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
}

TEST(RMSNorm, DefaultEpsIsTheDtypesMachineEpsilon) {
  Rng rng(10);
  RMSNorm n64(4, std::nullopt, true, Dtype::f64);
  const Tensor x = randn({2, 4}, rng, Dtype::f64);
  EXPECT_EQ(max_abs_diff(n64(x), rms_norm(x, n64.weight, std::numeric_limits<double>::epsilon())), 0.0);
  RMSNorm n32(4, std::nullopt, true, Dtype::f32);
  const Tensor x32 = x.to(Dtype::f32);
  EXPECT_EQ(max_abs_diff(n32(x32), rms_norm(x32, n32.weight, std::numeric_limits<float>::epsilon())), 0.0);
  RMSNorm plain(4, 0.5, false, Dtype::f64);
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_EQ(max_abs_diff(plain(x), rms_norm(x, Tensor(), 0.5)), 0.0);
}

TEST(NormLayers, BadInputsNameTheLayerAndShapes) {
  BatchNorm1d bn1(3, {}, Dtype::f64);
  BatchNorm2d bn2(3, {}, Dtype::f64);
  GroupNorm gn(2, 4, 1e-5, true, Dtype::f64);
  RMSNorm rms(4, 1e-6, true, Dtype::f64);
  expect_throws<ShapeError>([&] { bn1(zeros({2, 3, 4, 4}, Dtype::f64)); },
                            {"BatchNorm1d(3)", "(2, 3, 4, 4)", "(N, C) or (N, C, L)"});
  expect_throws<ShapeError>([&] { bn1(zeros({2, 4}, Dtype::f64)); }, {"BatchNorm1d(3)", "(2, 4)", "C = 3"});
  expect_throws<ShapeError>([&] { bn2(zeros({2, 3, 4}, Dtype::f64)); },
                            {"BatchNorm2d(3)", "(2, 3, 4)", "(N, C, H, W)"});
  expect_throws<ValueError>([&] { bn1(zeros({1, 3}, Dtype::f64)); },
                            {"batch_norm", "more than 1 value per channel", "(1, 3)"});
  expect_throws<ShapeError>([&] { gn(zeros({2, 6, 3}, Dtype::f64)); }, {"GroupNorm(2, 4)", "(2, 6, 3)"});
  expect_throws<ShapeError>([&] { rms(zeros({2, 5}, Dtype::f64)); }, {"RMSNorm(4)", "(2, 5)"});
  expect_throws<ValueError>([] { GroupNorm(4, 6); }, {"GroupNorm(4, 6)", "divisible"});
  expect_throws<ValueError>([] { BatchNorm1d(0); }, {"BatchNorm1d(0)"});
  expect_throws<ValueError>([] { BatchNorm2d(2, {.momentum = NAN}); }, {"BatchNorm2d(2)", "momentum"});
  expect_throws<ValueError>([] { RMSNorm(3, -1.0); }, {"RMSNorm(3)", "eps"});
}

}  // namespace
}  // namespace tg::nn
