// The recurrent layers without PyTorch (that is layers_torch_test.cpp): gradcheck and
// gradgradcheck of a small LSTM and GRU in their inputs, states and every parameter; a layer
// equals its cell stepped by hand; a scan's batch of 32 equals its quarters run alone; names,
// init bounds and bad inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/rnn.h>
#include <tapegrad/ops/ops.h>
#include "nn_util.h"
#include "test_util.h"

namespace tg::nn {
namespace {

using test::expect_throws;
using test::max_abs_diff;
using test::names;

// f(x, states..., parameters...) with the parameters set to the given tensors (shared).
template <class F>
GradcheckResult check_rnn(Module& m, std::vector<Tensor> inputs, int n_data, F outputs,
                          bool second_order) {
  std::vector<std::string> params;
  for (const auto& [name, p] : m.named_parameters()) {
    params.push_back(name);
    inputs.push_back(p.detach().clone().set_requires_grad());
  }
  const Function f = [&m, params, n_data, outputs](const std::vector<Tensor>& in) {
    for (std::size_t k = 0; k < params.size(); ++k) m.set_parameter(params[k], in[n_data + k]);
    return outputs(in);
  };
  return second_order ? gradgradcheck(f, inputs) : gradcheck(f, inputs);
}

TEST(LSTM, GradcheckInInputsStatesAndParameters) {
  Rng rng(1);
  LSTM lstm(2, 3, rng, {.num_layers = 2}, Dtype::f64);
  const std::vector<Tensor> in = {randn({3, 2, 2}, rng, Dtype::f64).set_requires_grad(),
                                  randn({2, 2, 3}, rng, Dtype::f64).set_requires_grad(),
                                  randn({2, 2, 3}, rng, Dtype::f64).set_requires_grad()};
  const auto outputs = [&lstm](const std::vector<Tensor>& x) {
    const LSTMOutput o = lstm(x[0], {x[1], x[2]});
    return std::vector<Tensor>{o.output, o.state.h, o.state.c};
  };
  const GradcheckResult first = check_rnn(lstm, in, 3, outputs, false);
  EXPECT_TRUE(first.passed) << first.message;
  LSTM small(2, 2, rng, {}, Dtype::f64);
  const auto small_out = [&small](const std::vector<Tensor>& x) {
    const LSTMOutput o = small(x[0], {x[1], x[2]});
    return std::vector<Tensor>{o.output, o.state.c};
  };
  const GradcheckResult second = check_rnn(
      small, {randn({2, 1, 2}, rng, Dtype::f64).set_requires_grad(), randn({1, 1, 2}, rng, Dtype::f64).set_requires_grad(),
              randn({1, 1, 2}, rng, Dtype::f64).set_requires_grad()},
      3, small_out, true);
  EXPECT_TRUE(second.passed) << second.message;
}

TEST(GRU, GradcheckInInputsStateAndParameters) {
  Rng rng(2);
  GRU gru(2, 3, rng, {.num_layers = 2, .batch_first = true}, Dtype::f64);
  const auto outputs = [&gru](const std::vector<Tensor>& x) {
    const GRUOutput o = gru(x[0], x[1]);
    return std::vector<Tensor>{o.output, o.h_n};
  };
  const GradcheckResult first = check_rnn(
      gru, {randn({2, 3, 2}, rng, Dtype::f64).set_requires_grad(), randn({2, 2, 3}, rng, Dtype::f64).set_requires_grad()},
      2, outputs, false);
  EXPECT_TRUE(first.passed) << first.message;
  GRUCell cell(2, 2, rng, true, Dtype::f64);
  const GradcheckResult second = check_rnn(
      cell, {randn({1, 2}, rng, Dtype::f64).set_requires_grad(), randn({1, 2}, rng, Dtype::f64).set_requires_grad()}, 2,
      [&cell](const std::vector<Tensor>& x) { return std::vector<Tensor>{cell(x[0], x[1])}; }, true);
  EXPECT_TRUE(second.passed) << second.message;
}

TEST(LSTM, EqualsItsCellSteppedByHand) {
  Rng rng(3);
  LSTM lstm(3, 4, rng, {}, Dtype::f64);
  LSTMCell cell(3, 4, rng, true, Dtype::f64);
  for (const auto& [name, p] : lstm.named_parameters())
    cell.set_parameter(name.substr(0, name.size() - 3), p);  // weight_ih_l0 -> weight_ih
  const Tensor x = randn({5, 2, 3}, rng, Dtype::f64);
  LSTMState s{randn({2, 4}, rng, Dtype::f64), randn({2, 4}, rng, Dtype::f64)};
  const LSTMOutput o = lstm(x, {reshape(s.h, {1, 2, 4}), reshape(s.c, {1, 2, 4})});
  for (int64_t t = 0; t < 5; ++t) {
    s = cell(reshape(narrow(x, 0, t, 1), {2, 3}), s);
    EXPECT_EQ(max_abs_diff(reshape(narrow(o.output, 0, t, 1), {2, 4}), s.h), 0.0) << "step " << t;
  }
  EXPECT_EQ(max_abs_diff(reshape(o.state.c, {2, 4}), s.c), 0.0);
}

// The output of f and the gradients of sum(f(x) * R) in every input x (copies of x).
std::vector<Tensor> value_and_grads(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                    const std::vector<Tensor>& x, const Tensor& R) {
  std::vector<Tensor> in;
  for (const Tensor& t : x) in.push_back(t.detach().clone().set_requires_grad());
  const Tensor y = f(in);
  sum(mul(y, R)).backward();
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& t : in) out.push_back(t.grad());
  return out;
}

// The largest difference between a and b, over the largest entry of a.
double rel_diff(const Tensor& a, const Tensor& b) {
  double scale = 0;
  for (double v : a.to_vector()) scale = std::max(scale, std::abs(v));
  return max_abs_diff(a, b) / scale;
}

// A scan's inputs, each with its batch axis (-1: shared by the batch), and its output's.
struct ScanCase {
  std::function<Tensor(const std::vector<Tensor>&)> f;
  std::vector<Tensor> x;
  std::vector<int> batch_axis;
  int y_axis;
};

// The largest relative difference between the scan of the whole batch of 32 (its step products
// by columns, ops/recurrence.h) and of its four quarters of 8 run alone (the products directly):
// outputs, the batch inputs' gradients quarter by quarter, the shared ones' summed. `shift` is
// added to the shared inputs of the quarters' runs (the negative control).
double batch_against_quarters(const ScanCase& c, double shift) {
  Rng rng(7);
  const Tensor R = randn(c.f(c.x).shape(), rng, Dtype::f64);
  const std::vector<Tensor> whole = value_and_grads(c.f, c.x, R);
  std::vector<Tensor> shared_sums(c.x.size());
  double worst = 0;
  for (int64_t q = 0; q < 4; ++q) {
    std::vector<Tensor> xq;
    for (std::size_t k = 0; k < c.x.size(); ++k)
      xq.push_back(c.batch_axis[k] < 0 ? add(c.x[k], shift)
                                       : narrow(c.x[k], c.batch_axis[k], 8 * q, 8));
    const std::vector<Tensor> part = value_and_grads(c.f, xq, narrow(R, c.y_axis, 8 * q, 8));
    worst = std::max(worst, rel_diff(narrow(whole[0], c.y_axis, 8 * q, 8), part[0]));
    for (std::size_t k = 0; k < c.x.size(); ++k) {
      const Tensor& g = whole[k + 1];
      if (c.batch_axis[k] >= 0)
        worst = std::max(worst, rel_diff(narrow(g, c.batch_axis[k], 8 * q, 8), part[k + 1]));
      else
        shared_sums[k] = q == 0 ? part[k + 1] : add(shared_sums[k], part[k + 1]);
    }
  }
  for (std::size_t k = 0; k < c.x.size(); ++k)
    if (c.batch_axis[k] < 0) worst = std::max(worst, rel_diff(whole[k + 1], shared_sums[k]));
  return worst;
}

TEST(Scans, ABatchOf32EqualsItsQuartersRunAlone) {
  Rng rng(6);
  const int64_t T = 4, B = 32, H = 64;
  const auto r = [&](Shape s) { return scale(randn(s, rng, Dtype::f64), 0.5); };
  const ScanCase lstm{
      [](const std::vector<Tensor>& x) { return lstm_scan(x[0], x[1], x[2], x[3], x[4]); },
      {r({T, B, 4 * H}), r({4 * H, H}), r({4 * H}), r({B, H}), r({B, H})},
      {1, -1, -1, 0, 0},
      2};
  const ScanCase gru{
      [](const std::vector<Tensor>& x) { return gru_scan(x[0], x[1], x[2], x[3]); },
      {r({T, B, 3 * H}), r({3 * H, H}), r({3 * H}), r({B, H})},
      {1, -1, -1, 0},
      1};
  for (const auto& [name, c] : {std::pair{"lstm_scan", lstm}, std::pair{"gru_scan", gru}}) {
    EXPECT_LT(batch_against_quarters(c, 0.0), 1e-12) << name;
    EXPECT_GT(batch_against_quarters(c, 1e-9), 1e-10) << name << ": a shift of 1e-9 went unseen";
  }
}

// The scans' kernels skip work a state without a gradient does not need: the first step's
// product with W (only dh0 and dc0 need it) and, for a zero h0, its term of W's gradient. The
// other gradients must not notice: with states that take no gradient (zero, the layers'
// default, and random), gi's, W's and b's gradients by the kernels equal those by the formulas
// (create_graph) and those with states that do take one. Negative control: h0 shifted by 1e-3
// moves W's gradient.
TEST(Scans, StatesWithoutGradientsLeaveTheOtherGradientsAsTheyWere) {
  Rng rng(8);
  for (const int64_t T : {int64_t{3}, int64_t{1}}) {  // one step: h0's term is all of W's
    SCOPED_TRACE("T " + std::to_string(T));
    const int64_t B = 5, H = 4;
    const auto r = [&](Shape s) { return scale(randn(s, rng, Dtype::f64), 0.5); };
    const Tensor gi4 = r({T, B, 4 * H}), W4 = r({4 * H, H}), b4 = r({4 * H}), c0 = r({B, H});
    const Tensor gi3 = r({T, B, 3 * H}), W3 = r({3 * H, H}), b3 = r({3 * H});
    const Tensor R = r({T, B, H}), R2 = r({2, T, B, H});
    // gi's, W's and b's gradients of sum(Y R); h0 (and c0) with or without a gradient.
    const auto grads = [&](bool lstm, const Tensor& h0, bool state_grad, bool create_graph) {
      const Tensor gi = (lstm ? gi4 : gi3).detach().set_requires_grad();
      const Tensor W = (lstm ? W4 : W3).detach().set_requires_grad();
      const Tensor b = (lstm ? b4 : b3).detach().set_requires_grad();
      const Tensor h = state_grad ? h0.detach().set_requires_grad() : h0.detach();
      const Tensor c = state_grad ? c0.detach().set_requires_grad() : c0.detach();
      const Tensor y = lstm ? lstm_scan(gi, W, b, h, c) : gru_scan(gi, W, b, h);
      return tg::grad({sum(mul(y, lstm ? R2 : R))}, {gi, W, b}, {}, create_graph);
    };
    for (const bool lstm : {true, false}) {
      SCOPED_TRACE(lstm ? "lstm_scan" : "gru_scan");
      for (const Tensor& h0 : {zeros({B, H}, Dtype::f64), r({B, H})}) {
        const std::vector<Tensor> kernel = grads(lstm, h0, false, false);
        const std::vector<Tensor> formula = grads(lstm, h0, false, true);
        const std::vector<Tensor> with_state = grads(lstm, h0, true, false);
        for (std::size_t k = 0; k < 3; ++k) {
          EXPECT_LT(max_abs_diff(kernel[k], formula[k]), 1e-13) << "input " << k;
          EXPECT_LT(max_abs_diff(kernel[k], with_state[k]), 1e-15) << "input " << k;
        }
      }
      const std::vector<Tensor> zero = grads(lstm, zeros({B, H}, Dtype::f64), false, false);
      const std::vector<Tensor> shifted = grads(lstm, full({B, H}, 1e-3, Dtype::f64), false, false);
      EXPECT_GT(max_abs_diff(zero[1], shifted[1]), 1e-6);
    }
  }
}

// The scans' step products run through op(W) packed in panels (ops/recurrence.h) when its
// width is a whole number of them (H 32 here: 4H, 3H and H are, at every SIMD width) and the
// sequence has 4 steps or more, in tiles of 8 (4 below AVX-512), 2 and 1 rows (the batches below
// take each). Against the steps composed from ops (matmul's
// products, another order of sums): the outputs, and every input's gradient of sum(Y R) by the
// kernels against the formulas' (create_graph). Negative control: W moved by 1e-6 in the
// composed steps.
TEST(Scans, PackedStepsEqualTheStepsComposedFromOps) {
  Rng rng(9);
  const int64_t T = 5, H = 32;  // 4 steps or more are packed
  for (const Dtype dtype : {Dtype::f64, Dtype::f32}) {
    const double tol = dtype == Dtype::f64 ? 1e-12 : 2e-5;
    for (const int64_t B : {1, 3, 5, 8, 11, 17}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", B " + std::to_string(B));
      const auto r = [&](Shape s) { return scale(randn(s, rng, dtype), 0.5); };
      const Tensor gi4 = r({T, B, 4 * H}), W4 = r({4 * H, H}), b4 = r({4 * H});
      const Tensor gi3 = r({T, B, 3 * H}), W3 = r({3 * H, H}), b3 = r({3 * H});
      const Tensor h0 = r({B, H}), c0 = r({B, H});
      const auto step = [&](const Tensor& gi, int64_t t) {
        return reshape(narrow(gi, 0, t, 1), {B, -1});
      };
      const auto lstm_by_ops = [&](const Tensor& W) {
        Tensor h = h0, c = c0;
        std::vector<Tensor> hs, cs;
        for (int64_t t = 0; t < T; ++t) {
          const Tensor G = add(add(step(gi4, t), matmul(h, W, false, true)), b4);
          const Tensor i = sigmoid(narrow(G, 1, 0, H)), f = sigmoid(narrow(G, 1, H, H)),
                       g = tanh(narrow(G, 1, 2 * H, H)), o = sigmoid(narrow(G, 1, 3 * H, H));
          c = add(mul(f, c), mul(i, g));
          h = mul(o, tanh(c));
          hs.push_back(h), cs.push_back(c);
        }
        return stack({stack(hs, 0), stack(cs, 0)}, 0);
      };
      const auto gru_by_ops = [&](const Tensor& W) {
        Tensor h = h0;
        std::vector<Tensor> hs;
        for (int64_t t = 0; t < T; ++t) {
          const Tensor gi = step(gi3, t), gh = add(matmul(h, W, false, true), b3);
          const Tensor rg = sigmoid(add(narrow(gi, 1, 0, H), narrow(gh, 1, 0, H)));
          const Tensor z = sigmoid(add(narrow(gi, 1, H, H), narrow(gh, 1, H, H)));
          const Tensor n = tanh(add(narrow(gi, 1, 2 * H, H), mul(rg, narrow(gh, 1, 2 * H, H))));
          h = add(n, mul(z, sub(h, n)));
          hs.push_back(h);
        }
        return stack(hs, 0);
      };
      EXPECT_LT(rel_diff(lstm_by_ops(W4), lstm_scan(gi4, W4, b4, h0, c0)), tol);
      EXPECT_LT(rel_diff(gru_by_ops(W3), gru_scan(gi3, W3, b3, h0)), tol);
      EXPECT_GT(rel_diff(lstm_by_ops(add(W4, 1e-6)), lstm_scan(gi4, W4, b4, h0, c0)), 1e-8);
      EXPECT_GT(rel_diff(gru_by_ops(add(W3, 1e-6)), gru_scan(gi3, W3, b3, h0)), 1e-8);
      for (const bool lstm : {true, false}) {
        SCOPED_TRACE(lstm ? "lstm_scan" : "gru_scan");
        std::vector<Tensor> x = lstm ? std::vector<Tensor>{gi4, W4, b4, h0, c0}
                                     : std::vector<Tensor>{gi3, W3, b3, h0};
        const Tensor R = r(lstm ? Shape{2, T, B, H} : Shape{T, B, H});
        const auto grads = [&](bool create_graph) {
          std::vector<Tensor> in;
          for (const Tensor& t : x) in.push_back(t.detach().set_requires_grad());
          const Tensor y = lstm ? lstm_scan(in[0], in[1], in[2], in[3], in[4])
                                : gru_scan(in[0], in[1], in[2], in[3]);
          return tg::grad({sum(mul(y, R))}, in, {}, create_graph);
        };
        const std::vector<Tensor> kernel = grads(false), formula = grads(true);
        for (std::size_t k = 0; k < x.size(); ++k)
          EXPECT_LT(rel_diff(formula[k], kernel[k]), tol) << "input " << k;
      }
    }
  }
}

TEST(GRU, OneStepIsTheFormulaByLoops) {
  Rng rng(4);
  GRUCell cell(1, 1, rng, true, Dtype::f64);
  const double x = 0.7, h = -0.4;
  const auto v = [&](const Tensor& t) { return t.to_vector(); };
  const std::vector<double> wi = v(cell.p.weight_ih), wh = v(cell.p.weight_hh), bi = v(cell.p.bias_ih),
                            bh = v(cell.p.bias_hh);
  const auto sig = [](double a) { return 1 / (1 + std::exp(-a)); };
  const double r = sig(wi[0] * x + bi[0] + wh[0] * h + bh[0]);
  const double z = sig(wi[1] * x + bi[1] + wh[1] * h + bh[1]);
  const double n = std::tanh(wi[2] * x + bi[2] + r * (wh[2] * h + bh[2]));
  const Tensor got = cell(from_vector({x}, {1}, Dtype::f64), from_vector({h}, {1}, Dtype::f64));
  EXPECT_NEAR(got.item(), (1 - z) * n + z * h, 1e-15);
}

TEST(RNN, NamesAndInitArePyTorchs) {
  Rng rng(5);
  LSTM lstm(3, 16, rng, {.num_layers = 2}, Dtype::f64);
  EXPECT_EQ(names(lstm.named_parameters()), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                                   "bias_hh_l0", "weight_ih_l1", "weight_hh_l1",
                                                   "bias_ih_l1", "bias_hh_l1"}));
  EXPECT_EQ(lstm.layers[0].weight_ih.shape(), (Shape{64, 3}));
  EXPECT_EQ(lstm.layers[1].weight_ih.shape(), (Shape{64, 16}));
  for (const auto& [name, p] : lstm.named_parameters()) {
    SCOPED_TRACE(name);
    double lo = 1, hi = -1;
    for (double e : p.to_vector()) lo = std::min(lo, e), hi = std::max(hi, e);
    EXPECT_GE(lo, -0.25);
    EXPECT_LE(hi, 0.25);
    EXPECT_LT(lo, -0.2);  // spread over the whole range, not a narrower one
    EXPECT_GT(hi, 0.2);
  }
  GRU gru(2, 4, rng, {.bias = false}, Dtype::f64);
  EXPECT_EQ(names(gru.named_parameters()), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_EQ(gru.layers[0].weight_hh.shape(), (Shape{12, 4}));
  GRUCell cell(2, 4, rng, true, Dtype::f64);
  EXPECT_EQ(names(cell.named_parameters()), (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
}

TEST(RNN, BadInputsNameTheLayerAndShapes) {
  Rng rng(6);
  const Dtype d = Dtype::f64;
  LSTM lstm(3, 4, rng, {.num_layers = 2}, d);
  GRU gru(3, 4, rng, {}, d);
  LSTMCell lcell(3, 4, rng, true, d);
  GRUCell gcell(3, 4, rng, true, d);
  const Tensor x = zeros({5, 2, 3}, d);
  expect_throws<ShapeError>([&] { lstm(zeros({5, 2, 4}, d)); },
                            {"LSTM(3, 4, num_layers=2)", "(5, 2, 4)", "(T, B, 3)"});
  expect_throws<ShapeError>([&] { lstm(zeros({1, 5, 2, 3}, d)); }, {"LSTM(3, 4", "(1, 5, 2, 3)"});
  expect_throws<ShapeError>([&] { lstm(x, {zeros({1, 2, 4}, d), zeros({2, 2, 4}, d)}); },
                            {"LSTM(3, 4", "state (1, 2, 4)", "(2, 2, 4)", "(5, 2, 3)"});
  expect_throws<ShapeError>([&] { lstm(x, {zeros({2, 2, 4}, d), Tensor()}); }, {"LSTM", "h_0 and c_0"});
  expect_throws<ShapeError>([&] { lstm(zeros({0, 2, 3}, d)); }, {"LSTM(3, 4", "(0, 2, 3)", "length 0"});
  expect_throws<ShapeError>([&] { gru(zeros({0, 3}, d)); }, {"GRU(3, 4", "(0, 3)", "length 0"});
  expect_throws<ShapeError>([&] { gru(x, zeros({1, 3, 4}, d)); }, {"GRU(3, 4", "state (1, 3, 4)", "(1, 2, 4)"});
  expect_throws<ShapeError>([&] { lcell(zeros({2, 2}, d)); }, {"LSTMCell(3, 4)", "(2, 2)"});
  expect_throws<ShapeError>([&] { gcell(zeros({2, 3}, d), zeros({3, 4}, d)); },
                            {"GRUCell(3, 4)", "state (3, 4)", "(2, 4)"});
  expect_throws<ValueError>([&] { LSTM(3, 0, rng); }, {"LSTM(3, 0", "sizes"});
  expect_throws<ValueError>([&] { GRU(3, 2, rng, {.num_layers = 0}); }, {"GRU(3, 2", "num_layers"});
  expect_throws<ValueError>([&] { GRUCell(0, 2, rng); }, {"GRUCell(0, 2)"});
}

}  // namespace
}  // namespace tg::nn
