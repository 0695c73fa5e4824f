// The functional API (check/functional.h) against central differences in float64, on the
// attention layer, a 2-layer tanh MLP and a tiny GPT's loss (tests/functional_util.h): every
// Jacobian block, vjp, the Hessian (against differences of the gradient, and symmetric to 1e-12),
// hvp and vhp (against differences of the gradient along v). Then create_graph (the results
// differentiate again), PyTorch's zeros for an input f does not use, a Hessian with known mixed
// partials by hand, the negative controls, and the README's example. PyTorch's own answers are
// in functional_torch_test; the bad inputs in bad_input_test's table.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/check/functional.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "functional_util.h"

namespace tg::test {
namespace {

constexpr double kStep = 1e-6;

// A copy of x with element k moved by delta.
Tensor moved(const Tensor& x, int64_t k, double delta) {
  std::vector<double> v = x.to_vector();
  v[k] += delta;
  return from_vector(v, x.shape(), x.dtype());
}

// Central differences of output i of f in input j, laid out as the Jacobian block (y_i.shape +
// x_j.shape, row-major): entry (o, k) = (f(x + h e_k) - f(x - h e_k))[o] / 2h.
std::vector<double> differences(const Function& f, const std::vector<Tensor>& x, std::size_t i,
                                std::size_t j) {
  const int64_t n = x[j].numel();
  std::vector<double> J;
  for (int64_t k = 0; k < n; ++k) {
    std::vector<Tensor> plus = x, minus = x;
    plus[j] = moved(x[j], k, kStep);
    minus[j] = moved(x[j], k, -kStep);
    const std::vector<double> yp = f(plus)[i].to_vector(), ym = f(minus)[i].to_vector();
    if (J.empty()) J.resize(yp.size() * n);
    for (std::size_t o = 0; o < yp.size(); ++o) J[o * n + k] = (yp[o] - ym[o]) / (2 * kStep);
  }
  return J;
}

// f's gradient as a function (for differences of it): grad f(x) for each input.
Function gradient(const Function& scalar) {
  return [scalar](const std::vector<Tensor>& x) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : x) leaves.push_back(t.detach().clone().set_requires_grad());
    return grad(scalar(leaves), leaves);
  };
}

// "" when every entry satisfies |got - want| <= atol + rtol |want|, else the worst entry.
std::string mismatch(const std::vector<double>& got, const std::vector<double>& want,
                     double atol = 1e-7, double rtol = 1e-6) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " entries, expected " + std::to_string(want.size());
  std::size_t worst = 0;
  double excess = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double over = std::abs(got[e] - want[e]) - (atol + rtol * std::abs(want[e]));
    if (over > excess) excess = over, worst = e;
  }
  if (excess <= 0) return "";
  return "entry " + std::to_string(worst) + ": " + std::to_string(got[worst]) + " vs " +
         std::to_string(want[worst]);
}

std::vector<Tensor> randn_like(const std::vector<Tensor>& xs, Rng& rng) {
  std::vector<Tensor> v;
  for (const Tensor& x : xs) v.push_back(randn(x.shape(), rng, Dtype::f64));
  return v;
}

TEST(Functional, JacobianMatchesCentralDifferences) {
  for (const Model& m : models()) {
    SCOPED_TRACE(m.name);
    const std::vector<Tensor> x = inputs_of(m);
    const Jacobian J = jacobian(m.f, x);
    const std::vector<Tensor> y = m.f(x);
    ASSERT_EQ(J.size(), y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      ASSERT_EQ(J[i].size(), x.size());
      for (std::size_t j = 0; j < x.size(); ++j) {
        SCOPED_TRACE("output " + std::to_string(i) + ", input " + std::to_string(j));
        std::vector<int64_t> dims = y[i].shape().vec();
        for (int64_t d : x[j].shape().vec()) dims.push_back(d);
        EXPECT_EQ(J[i][j].shape(), Shape(dims));
        EXPECT_FALSE(J[i][j].requires_grad());
        EXPECT_EQ(mismatch(J[i][j].to_vector(), differences(m.f, x, i, j)), "");
      }
    }
  }
}

TEST(Functional, VjpMatchesCentralDifferences) {
  Rng rng(7);
  for (const Model& m : models()) {
    SCOPED_TRACE(m.name);
    const std::vector<Tensor> x = inputs_of(m);
    const std::vector<Tensor> y = m.f(x);
    const std::vector<Tensor> v = randn_like(y, rng);
    const auto [outputs, vjps] = vjp(m.f, x, v);
    ASSERT_EQ(outputs.size(), y.size());
    for (std::size_t i = 0; i < y.size(); ++i)
      EXPECT_EQ(outputs[i].to_vector(), y[i].to_vector());
    ASSERT_EQ(vjps.size(), x.size());
    for (std::size_t j = 0; j < x.size(); ++j) {
      SCOPED_TRACE("input " + std::to_string(j));
      const int64_t n = x[j].numel();
      std::vector<double> want(n, 0.0);  // sum_i v_i^T (dy_i/dx_j), by differences
      for (std::size_t i = 0; i < y.size(); ++i) {
        const std::vector<double> J = differences(m.f, x, i, j), vi = v[i].to_vector();
        for (std::size_t o = 0; o < vi.size(); ++o)
          for (int64_t k = 0; k < n; ++k) want[k] += vi[o] * J[o * n + k];
      }
      EXPECT_EQ(vjps[j].shape(), x[j].shape());
      EXPECT_EQ(mismatch(vjps[j].to_vector(), want), "");
    }
  }
}

// Forward mode: jacobian's forward columns against central differences, and jvp's J t against
// J t made from those differences.
TEST(Functional, ForwardModeMatchesCentralDifferences) {
  Rng rng(11);
  for (const Model& m : models()) {
    SCOPED_TRACE(m.name);
    const std::vector<Tensor> x = inputs_of(m);
    const Jacobian J = jacobian(m.f, x, JacobianMode::forward);
    const std::vector<Tensor> y = m.f(x);
    const std::vector<Tensor> t = randn_like(x, rng);
    const auto [outputs, jvps] = jvp(m.f, x, t);
    ASSERT_EQ(J.size(), y.size());
    ASSERT_EQ(jvps.size(), y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(outputs[i].to_vector(), y[i].to_vector());
      std::vector<double> want(y[i].numel(), 0.0);  // sum_j (dy_i/dx_j) t_j, by differences
      for (std::size_t j = 0; j < x.size(); ++j) {
        SCOPED_TRACE("output " + std::to_string(i) + ", input " + std::to_string(j));
        const std::vector<double> D = differences(m.f, x, i, j), tj = t[j].to_vector();
        EXPECT_EQ(mismatch(J[i][j].to_vector(), D), "");
        const int64_t n = x[j].numel();
        for (std::size_t o = 0; o < want.size(); ++o)
          for (int64_t k = 0; k < n; ++k) want[o] += D[o * n + k] * tj[k];
      }
      EXPECT_EQ(jvps[i].shape(), y[i].shape());
      EXPECT_EQ(mismatch(jvps[i].to_vector(), want), "");
    }
  }
}

// |H[i][j][o, k] - H[j][i][k, o]| over the largest |H|.
double asymmetry(const Jacobian& H, const std::vector<Tensor>& x) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) {
      const std::vector<double> a = H[i][j].to_vector(), b = H[j][i].to_vector();
      const int64_t ni = x[i].numel(), nj = x[j].numel();
      for (int64_t o = 0; o < ni; ++o)
        for (int64_t k = 0; k < nj; ++k) {
          diff = std::max(diff, std::abs(a[o * nj + k] - b[k * ni + o]));
          scale = std::max(scale, std::abs(a[o * nj + k]));
        }
    }
  return diff / scale;
}

TEST(Functional, HessianMatchesDifferencesOfTheGradientAndIsSymmetric) {
  for (const Model& m : models()) {
    SCOPED_TRACE(m.name);
    const std::vector<Tensor> x = inputs_of(m);
    const Jacobian H = hessian(m.scalar, x);
    ASSERT_EQ(H.size(), x.size());
    const Function g = gradient(m.scalar);
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t j = 0; j < x.size(); ++j) {
        SCOPED_TRACE("inputs " + std::to_string(i) + ", " + std::to_string(j));
        std::vector<int64_t> dims = x[i].shape().vec();
        for (int64_t d : x[j].shape().vec()) dims.push_back(d);
        EXPECT_EQ(H[i][j].shape(), Shape(dims));
        EXPECT_EQ(mismatch(H[i][j].to_vector(), differences(g, x, i, j)), "");
      }
    EXPECT_LE(asymmetry(H, x), 1e-12);
    // Forward over reverse: the same blocks, symmetric too.
    const Jacobian Hf = hessian(m.scalar, x, JacobianMode::forward);
    for (std::size_t i = 0; i < x.size(); ++i)
      for (std::size_t j = 0; j < x.size(); ++j) {
        SCOPED_TRACE("forward over reverse, inputs " + std::to_string(i) + ", " + std::to_string(j));
        EXPECT_EQ(Hf[i][j].shape(), H[i][j].shape());
        EXPECT_EQ(mismatch(Hf[i][j].to_vector(), H[i][j].to_vector(), 1e-12, 1e-10), "");
      }
    EXPECT_LE(asymmetry(Hf, x), 1e-12);
  }
}

TEST(Functional, HvpAndVhpMatchDifferencesOfTheGradientAlongV) {
  Rng rng(8);
  for (const Model& m : models()) {
    SCOPED_TRACE(m.name);
    const std::vector<Tensor> x = inputs_of(m);
    const std::vector<Tensor> v = randn_like(x, rng);
    // (grad f(x + h v) - grad f(x - h v)) / 2h = H v
    std::vector<Tensor> plus, minus;
    for (std::size_t j = 0; j < x.size(); ++j) {
      plus.push_back(add(x[j], scale(v[j], kStep)));
      minus.push_back(sub(x[j], scale(v[j], kStep)));
    }
    const std::vector<Tensor> gp = gradient(m.scalar)(plus), gm = gradient(m.scalar)(minus);
    const auto hv = hvp(m.scalar, x, v);
    const auto vh = vhp(m.scalar, x, v);
    EXPECT_EQ(hv.output.item(), m.scalar(x)[0].item());
    EXPECT_EQ(vh.output.item(), m.scalar(x)[0].item());
    for (std::size_t j = 0; j < x.size(); ++j) {
      SCOPED_TRACE("input " + std::to_string(j));
      const Tensor want = scale(sub(gp[j], gm[j]), 1 / (2 * kStep));
      EXPECT_EQ(mismatch(hv.product[j].to_vector(), want.to_vector()), "");
      EXPECT_EQ(mismatch(vh.product[j].to_vector(), want.to_vector()), "");
    }
  }
}

TEST(Functional, OneTensorFormsEqualTheVectorForms) {
  Rng rng(9);
  const Tensor x = randn({3, 2}, rng, Dtype::f64);
  const Tensor v = randn({3, 2}, rng, Dtype::f64);
  const TensorFunction f = [](const Tensor& t) { return mul(tanh(t), exp(t)); };
  const Function fv = [&f](const std::vector<Tensor>& t) { return std::vector<Tensor>{f(t[0])}; };
  const TensorFunction s = [](const Tensor& t) { return sum(mul(tanh(t), exp(t))); };
  const Function sv = [&s](const std::vector<Tensor>& t) { return std::vector<Tensor>{s(t[0])}; };
  EXPECT_EQ(jacobian(f, x).to_vector(), jacobian(fv, {x})[0][0].to_vector());
  EXPECT_EQ(jacobian(f, x).shape(), Shape({3, 2, 3, 2}));
  EXPECT_EQ(vjp(f, x, v).vjps.to_vector(), vjp(fv, {x}, {v}).vjps[0].to_vector());
  EXPECT_EQ(vjp(s, x).vjps.to_vector(), vjp(sv, {x}).vjps[0].to_vector());
  EXPECT_EQ(hessian(s, x).to_vector(), hessian(sv, {x})[0][0].to_vector());
  EXPECT_EQ(hvp(s, x, v).product.to_vector(), hvp(sv, {x}, {v}).product[0].to_vector());
  EXPECT_EQ(vhp(s, x, v).product.to_vector(), vhp(sv, {x}, {v}).product[0].to_vector());
  // A scalar input needs no v: v = 1.
  const Tensor c = scalar(0.3, Dtype::f64);
  EXPECT_NEAR(vhp(s, c).product.item(), hessian(s, c).item(), 1e-15);
  EXPECT_NEAR(hvp(s, c).product.item(), hessian(s, c).item(), 1e-15);
}

// f(x) = x: the Jacobian is the identity (the output is the input itself, a leaf). And under a
// NoGradGuard the functions still record what create_graph asks for (PyTorch's enable_grad).
TEST(Functional, IdentityAndUnderNoGradGuard) {
  Rng rng(12);
  const Tensor x = randn({2, 3}, rng, Dtype::f64);
  const Tensor I = jacobian([](const Tensor& t) { return t; }, x);
  EXPECT_EQ(I.shape(), Shape({2, 3, 2, 3}));
  EXPECT_EQ(I.to_vector(), reshape(eye(6, Dtype::f64), {2, 3, 2, 3}).to_vector());
  const TensorFunction f = [](const Tensor& t) { return mul(t, tanh(t)); };
  const Tensor want = jacobian(f, x);
  Tensor w = x.detach().clone().set_requires_grad();
  const NoGradGuard off;
  const Tensor J = jacobian(f, w, {.create_graph = true});
  EXPECT_TRUE(J.requires_grad());
  EXPECT_EQ(J.to_vector(), want.to_vector());
  EXPECT_TRUE(hvp([](const Tensor& t) { return sum(mul(t, exp(t))); }, w, x,
                  {.create_graph = true}).product.requires_grad());
}

// The Jacobian with create_graph is a function of x again: its derivative (by the tape) against
// central differences of the Jacobian computed without.
TEST(Functional, CreateGraphResultsDifferentiateAgain) {
  Rng rng(10);
  Model m = mlp_model(rng);
  std::vector<Tensor> x = inputs_of(m);
  for (Tensor& t : x) t.set_requires_grad();
  const Tensor W = randn({5, 2, 6, 3}, rng, Dtype::f64);  // weights of the block dy/dW1
  const Jacobian J = jacobian(m.f, x, {.create_graph = true});
  ASSERT_TRUE(J[0][1].requires_grad());
  const std::vector<Tensor> dJ = grad({sum(mul(J[0][1], W))}, x);
  const Function weighted = [&](const std::vector<Tensor>& xs) {
    return std::vector<Tensor>{sum(mul(jacobian(m.f, xs)[0][1], W))};
  };
  for (std::size_t j = 0; j < x.size(); ++j) {
    SCOPED_TRACE("input " + std::to_string(j));
    EXPECT_EQ(mismatch(dJ[j].to_vector(), differences(weighted, x, 0, j)), "");
  }
  // vjp of a scalar f with create_graph is its gradient on the tape: its vjp with w is H w.
  const std::vector<Tensor> w = randn_like(x, rng);
  const auto g = vjp(m.scalar, x, {}, {.create_graph = true});
  ASSERT_TRUE(g.vjps[0].requires_grad());
  Tensor gw;
  for (std::size_t j = 0; j < x.size(); ++j) {
    const Tensor t = sum(mul(g.vjps[j], w[j]));
    gw = gw.defined() ? add(gw, t) : t;
  }
  const std::vector<Tensor> Hw = grad({gw}, x);
  const auto hv = hvp(m.scalar, x, w);
  for (std::size_t j = 0; j < x.size(); ++j)
    EXPECT_EQ(mismatch(Hw[j].to_vector(), hv.product[j].to_vector(), 1e-12, 1e-12), "");
  // hessian, hvp and vhp with create_graph stay on the tape; without, they are off it, and the
  // caller's leaves gain no .grad().
  EXPECT_TRUE(hessian(m.scalar, x, {.create_graph = true})[1][1].requires_grad());
  EXPECT_TRUE(hvp(m.scalar, x, w, {.create_graph = true}).product[0].requires_grad());
  EXPECT_TRUE(vhp(m.scalar, x, w, {.create_graph = true}).product[0].requires_grad());
  EXPECT_FALSE(hessian(m.scalar, x)[1][1].requires_grad());
  EXPECT_FALSE(hv.product[0].requires_grad());
  EXPECT_FALSE(hv.output.requires_grad());
  for (const Tensor& t : x) EXPECT_FALSE(t.grad().defined());
}

// As PyTorch's: an input no output depends on, and an output that depends on no input, give
// zeros (strict mode refuses them: bad_input_test).
TEST(Functional, IndependentInputsAndOutputsGiveZeros) {
  const Tensor a = from_vector({1, 2}, {2}, Dtype::f64), b = from_vector({3, 4, 5}, {3}, Dtype::f64);
  const Function uses_a = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum(mul(x[0], x[0])), full({2}, 7.0, Dtype::f64)};
  };
  const Jacobian J = jacobian(uses_a, {a, b});
  EXPECT_EQ(J[0][0].to_vector(), (std::vector<double>{2, 4}));
  EXPECT_EQ(J[0][1].to_vector(), std::vector<double>(3, 0.0));
  EXPECT_EQ(J[1][0].to_vector(), std::vector<double>(4, 0.0));
  EXPECT_EQ(J[1][1].shape(), Shape({2, 3}));
  const auto r = vjp(uses_a, {a, b}, {scalar(1.0, Dtype::f64), ones({2}, Dtype::f64)});
  EXPECT_EQ(r.vjps[1].to_vector(), std::vector<double>(3, 0.0));
  const Function scalar_a = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum(mul(x[0], x[0]))};
  };
  const Jacobian H = hessian(scalar_a, {a, b});
  EXPECT_EQ(H[0][0].to_vector(), (std::vector<double>{2, 0, 0, 2}));
  EXPECT_EQ(H[1][1].to_vector(), std::vector<double>(9, 0.0));
  EXPECT_EQ(hvp(scalar_a, {a, b}, {a, b}).product[1].to_vector(), std::vector<double>(3, 0.0));
  EXPECT_EQ(vhp(scalar_a, {a, b}, {a, b}).product[0].to_vector(), (std::vector<double>{2, 4}));
}

// f(x, y) = sum(x^2 y) + sum(x) sum(y)^2 for x, y of 2 entries, by hand:
//   d2f/dx_i dx_j = 2 y_i [i = j];  d2f/dx_i dy_j = 2 x_i [i = j] + 2 sum(y);
//   d2f/dy_i dy_j = 2 sum(x).
TEST(Functional, HessianWithMixedPartialsByHand) {
  const Tensor x = from_vector({0.5, -1.5}, {2}, Dtype::f64), y = from_vector({2, 3}, {2}, Dtype::f64);
  const Function f = [](const std::vector<Tensor>& t) {
    const Tensor sy = sum(t[1]);
    return std::vector<Tensor>{add(sum(mul(mul(t[0], t[0]), t[1])), mul(sum(t[0]), mul(sy, sy)))};
  };
  const Jacobian H = hessian(f, {x, y});
  EXPECT_EQ(H[0][0].to_vector(), (std::vector<double>{4, 0, 0, 6}));
  EXPECT_EQ(H[0][1].to_vector(), (std::vector<double>{11, 10, 10, 7}));
  EXPECT_EQ(H[1][0].to_vector(), (std::vector<double>{11, 10, 10, 7}));
  EXPECT_EQ(H[1][1].to_vector(), (std::vector<double>{-2, -2, -2, -2}));
  // Negative control: the same check fails on a Hessian that misses the mixed term 2 sum(y).
  EXPECT_NE(mismatch(H[0][1].to_vector(), {1, 0, 0, -3}), "");
}

// Negative controls: the comparisons above can fail. The MLP's Jacobian in x against differences
// of an MLP whose W2[0, 0] moved by 1e-3, and a Hessian against differences of the gradient of
// another function.
TEST(Functional, NegativeControlsFail) {
  Rng rng(11);
  const Model m = mlp_model(rng);
  const std::vector<Tensor> x = inputs_of(m);
  std::vector<Tensor> wrong = x;
  wrong[3] = moved(x[3], 0, 1e-3);  // W2[0, 0]
  EXPECT_NE(mismatch(jacobian(m.f, x)[0][0].to_vector(), differences(m.f, wrong, 0, 0)), "");
  const Function other = [](const std::vector<Tensor>& t) {  // mean((y - 0)^2): no targets
    const Tensor y = mlp_forward(t);
    return std::vector<Tensor>{mean(mul(y, y))};
  };
  EXPECT_NE(mismatch(hessian(m.scalar, x)[1][3].to_vector(), differences(gradient(other), x, 1, 3)),
            "");
  // And the symmetry check sees an asymmetric "Hessian".
  Jacobian H = hessian(m.scalar, x);
  H[0][1] = moved(H[0][1], 4, 1e-9 * std::max(1.0, std::abs(H[0][1].to_vector()[4])));
  EXPECT_GT(asymmetry(H, x), 1e-12);
}

// The code between the README markers below, unindented by 2.
std::string readme_example() {
  std::ifstream in(TAPEGRAD_FUNCTIONAL_TEST_CPP);
  std::string code, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "  // README end") break;
    if (inside) code += (line.size() >= 2 ? line.substr(2) : line) + "\n";
    if (line == "  // README begin") inside = true;
  }
  return code;
}

// The README's "Beyond reverse mode" example, run here; the README must show it verbatim.
TEST(Functional, ReadmeExampleRunsAndTheReadmeShowsIt) {
  // README begin
  using namespace tg;
  // f(x, W) = sum(tanh(x W)): two inputs, one scalar output
  Function f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(tanh(matmul(in[0], in[1])))};
  };
  Tensor x = from_vector({0.5, -1.0}, {1, 2}, Dtype::f64);
  Tensor W = from_vector({0.1, 0.2, 0.3, 0.4}, {2, 2}, Dtype::f64);
  auto [y, g] = vjp(f, {x, W});          // y[0] = f(x, W); g = {df/dx (1, 2), df/dW (2, 2)}
  Jacobian J = jacobian(f, {x, W});      // J[0][1] = df/dW, of shape () + (2, 2)
  Jacobian H = hessian(f, {x, W});       // H[1][0] = d2f/dW dx, of shape (2, 2) + (1, 2)
  auto [fx, Hv] = hvp(f, {x, W}, {x, W});  // H v for v = (x, W)
  auto [fx2, vH] = vhp(f, {x, W}, {x, W}); // v^T H: the same, as H is symmetric
  // A function of one tensor gets and gives tensors: the Hessian of sum(t^3) is diag(6 t).
  TensorFunction cubes = [](const Tensor& t) { return sum(mul(t, mul(t, t))); };
  Tensor H_cubes = hessian(cubes, x);    // (1, 2, 1, 2)
  // README end
  EXPECT_EQ(J[0][1].to_vector(), g[1].to_vector());
  EXPECT_EQ(H[1][0].shape(), Shape({2, 2, 1, 2}));
  EXPECT_EQ(fx.item(), y[0].item());
  EXPECT_EQ(fx2.item(), y[0].item());
  for (std::size_t j = 0; j < 2; ++j)
    EXPECT_EQ(mismatch(Hv[j].to_vector(), vH[j].to_vector(), 1e-15, 1e-14), "");
  EXPECT_EQ(H_cubes.to_vector(), (std::vector<double>{3, 0, 0, -6}));
  const std::string code = readme_example();
  ASSERT_GT(code.size(), 200u);
  std::ifstream readme(TAPEGRAD_README_MD);
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find(code), std::string::npos)
      << "README.md does not show this example verbatim:\n" << code;
}

}  // namespace
}  // namespace tg::test
