// The attention models against an independent plain-loop reference written from the models' math in
// nn/attention.h (no tg op inside it), their gradients, float32, the RoPE op and the layer class.
// Bad inputs are in models_bad_input_test.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>
#include "attention_util.h"

namespace {

using tg::AttentionOptions;
using tg::Tensor;
using Vec = std::vector<double>;
using tg::test::expect_close;
using tg::test::rope_loops;

struct Case {
  const char* name;
  int64_t B, T, D, d_k, d_v;  // B == 0: a 2-D X
  AttentionOptions o;
  bool w_o;
};

// Multi-head runs the multi-head model; heads == 1 runs the single-head one.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"single_2d", 0, 5, 4, 4, 3, {}, false},
      {"single_2d_wo", 0, 5, 4, 4, 3, {}, true},
      {"single_3d", 2, 4, 3, 4, 2, {}, false},
      {"single_window2_wo", 0, 6, 4, 4, 4, {.window = 2}, true},
      {"single_no_scale_3d", 2, 4, 4, 2, 4, {.scale = false}, false},
      {"single_rope", 0, 6, 4, 6, 4, {.rope = true}, false},
      {"single_rope_base100_window3_3d_wo", 2, 5, 4, 4, 4,
       {.window = 3, .rope = true, .rope_base = 100.0}, true},
      {"multi_h2_wo", 2, 4, 4, 4, 4, {.heads = 2}, true},
      {"multi_h2_2d", 0, 5, 4, 4, 6, {.heads = 2}, false},
      {"multi_h4_wo", 2, 4, 6, 8, 4, {.heads = 4}, true},
      {"multi_h2_rope_wo", 2, 5, 4, 8, 4, {.heads = 2, .rope = true}, true},
      {"multi_h4_rope_window2_wo", 3, 5, 5, 8, 8, {.heads = 4, .window = 2, .rope = true}, true},
      {"multi_h2_no_scale_base50", 2, 4, 4, 4, 4,
       {.heads = 2, .scale = false, .rope = true, .rope_base = 50.0}, false},
  };
  return c;
}

// X, W_Q, W_K, W_V and (when used) W_O, fixed seed; weights large enough that A is far from
// uniform.
std::vector<Tensor> make_inputs(const Case& c, uint64_t seed = 7) {
  tg::Rng rng(seed);
  std::vector<Tensor> in;
  in.push_back(c.B ? tg::randn({c.B, c.T, c.D}, rng) : tg::randn({c.T, c.D}, rng));
  in.push_back(tg::randn({c.D, c.d_k}, rng, tg::Dtype::f64, 0.5));
  in.push_back(tg::randn({c.D, c.d_k}, rng, tg::Dtype::f64, 0.5));
  in.push_back(tg::randn({c.D, c.d_v}, rng, tg::Dtype::f64, 0.5));
  if (c.w_o) in.push_back(tg::randn({c.d_v, c.d_v}, rng, tg::Dtype::f64, 0.5));
  return in;
}

tg::AttentionOutput run(const Case& c, const std::vector<Tensor>& in) {
  const Tensor W_O = in.size() > 4 ? in[4] : Tensor();
  AttentionOptions o = c.o;
  o.need_weights = true;  // the composed path; the fused one is compared with it elsewhere
  return o.heads == 1 ? tg::single_head_attention(in[0], in[1], in[2], in[3], W_O, o)
                      : tg::multi_head_attention(in[0], in[1], in[2], in[3], W_O, o);
}

struct Ref {
  Vec Y;  // (B, T, d_v)
  Vec A;  // (B, H, T, T)
  Vec S;  // (B, H, T, T): the scaled scores, before the mask
};

// Attention written straight from the formulas, one (batch, head) at a time.
Ref reference(const Case& c, const std::vector<Vec>& in) {
  const int64_t B = std::max<int64_t>(c.B, 1), T = c.T, D = c.D, H = c.o.heads;
  const int64_t d_k = c.d_k, d_v = c.d_v, dh = d_k / H, dvh = d_v / H, w = c.o.window;
  const Vec &X = in[0], &WQ = in[1], &WK = in[2], &WV = in[3];
  Ref r{Vec(B * T * d_v, 0.0), Vec(B * H * T * T, 0.0), Vec(B * H * T * T, 0.0)};
  Vec O(B * T * d_v, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      Vec q(T * dh, 0.0), k(T * dh, 0.0), v(T * dvh, 0.0);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < D; ++e) {
          const double x = X[(b * T + t) * D + e];
          for (int64_t j = 0; j < dh; ++j) q[t * dh + j] += x * WQ[e * d_k + h * dh + j];
          for (int64_t j = 0; j < dh; ++j) k[t * dh + j] += x * WK[e * d_k + h * dh + j];
          for (int64_t j = 0; j < dvh; ++j) v[t * dvh + j] += x * WV[e * d_v + h * dvh + j];
        }
      if (c.o.rope) rope_loops(q, T, dh, c.o.rope_base), rope_loops(k, T, dh, c.o.rope_base);
      const double s = c.o.scale ? 1.0 / std::sqrt(static_cast<double>(dh)) : 1.0;
      for (int64_t i = 0; i < T; ++i) {
        double* score = &r.S[((b * H + h) * T + i) * T];
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < dh; ++e) score[j] += q[i * dh + e] * k[j * dh + e] * s;
        Vec sc(T, -std::numeric_limits<double>::infinity());
        double mx = sc[0], z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          if (w > 0 && j <= i - w) continue;
          sc[j] = 0;
          for (int64_t e = 0; e < dh; ++e) sc[j] += q[i * dh + e] * k[j * dh + e] * s;
          mx = std::max(mx, sc[j]);
        }
        for (int64_t j = 0; j < T; ++j) z += std::exp(sc[j] - mx);
        double* a = &r.A[((b * H + h) * T + i) * T];
        for (int64_t j = 0; j < T; ++j) a[j] = std::exp(sc[j] - mx) / z;
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < dvh; ++e)
          O[(b * T + i) * d_v + h * dvh + e] += a[j] * v[j * dvh + e];
      }
    }
  if (!c.w_o) r.Y = O;
  else
    for (int64_t row = 0; row < B * T; ++row)
      for (int64_t j = 0; j < d_v; ++j)
        for (int64_t e = 0; e < d_v; ++e)
          r.Y[row * d_v + j] += O[row * d_v + e] * in[4][e * d_v + j];
  return r;
}

std::vector<Vec> values(const std::vector<Tensor>& in) {
  std::vector<Vec> v;
  for (const Tensor& t : in) v.push_back(t.to_vector());
  return v;
}

double ref_loss(const Case& c, const std::vector<Vec>& in) {
  double l = 0;
  for (double y : reference(c, in).Y) l += 0.5 * y * y;
  return l;
}

TEST(Attention, MatchesLoopReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto in = make_inputs(c);
    const tg::AttentionOutput out = run(c, in);
    const Ref ref = reference(c, values(in));
    std::vector<int64_t> a_dims{c.T, c.T}, y_dims{c.T, c.d_v};
    if (c.o.heads > 1) a_dims.insert(a_dims.begin(), c.o.heads);
    if (c.B) a_dims.insert(a_dims.begin(), c.B), y_dims.insert(y_dims.begin(), c.B);
    EXPECT_EQ(out.Y.shape(), tg::Shape(y_dims)) << out.Y.shape().str();
    EXPECT_EQ(out.A.shape(), tg::Shape(a_dims)) << out.A.shape().str();
    EXPECT_EQ(out.S.shape(), tg::Shape(a_dims)) << out.S.shape().str();
    EXPECT_EQ(out.W_O.defined(), c.w_o);
    expect_close(out.Y.to_vector(), ref.Y, 1e-12, "Y");
    expect_close(out.A.to_vector(), ref.A, 1e-12, "A");
    expect_close(out.S.to_vector(), ref.S, 1e-12, "S");
  }
}

// W_Q = 0 makes every score 0, so row i spreads evenly over the positions it sees.
TEST(Attention, ZeroQueryGivesUniformWeightsOverVisiblePositions) {
  for (int64_t w : {0, 2}) {
    SCOPED_TRACE("window " + std::to_string(w));
    tg::Rng rng(3);
    const Tensor X = tg::randn({5, 3}, rng), W = tg::randn({3, 2}, rng);
    const auto out = tg::single_head_attention(X, tg::zeros({3, 2}), W, W, Tensor(),
                                             {.window = w, .need_weights = true});
    for (int64_t i = 0; i < 5; ++i) {
      const int64_t seen = w ? std::min<int64_t>(i + 1, w) : i + 1;
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_NEAR(out.A.at({i, j}), (j <= i && j > i - seen) ? 1.0 / seen : 0.0, 1e-15);
    }
  }
}

TEST(Attention, WindowOneIsIdentityAndLargeWindowIsPlainCausal) {
  const Case c{"", 2, 4, 3, 4, 4, {}, true};
  const auto in = make_inputs(c);
  const auto one = tg::single_head_attention(in[0], in[1], in[2], in[3], Tensor(),
                                           {.window = 1, .need_weights = true});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(one.A.at({b, i, j}), i == j ? 1.0 : 0.0);
  expect_close(one.Y.to_vector(), one.V.to_vector(), 1e-15, "Y == V");
  // A window of T or more hides nothing: the fused kernel sees the same key range [0, i] and
  // causal_mask builds the same mask as with no window, so each path equals its own plain run
  // bit for bit on every CPU. The two paths differ from each other by a few roundings (the
  // fused softmax runs over the visible keys, the composed one over the whole masked row; which
  // of them Eigen vectorises depends on the CPU's packet size), hence the tolerance between them.
  for (bool need_weights : {false, true}) {
    SCOPED_TRACE(need_weights ? "composed" : "fused");
    auto attend = [&](int64_t window) {
      return tg::single_head_attention(in[0], in[1], in[2], in[3], in[4],
                                       {.window = window, .need_weights = need_weights})
          .Y.to_vector();
    };
    const auto plain = attend(0);
    for (int64_t w : {4, 9}) {
      SCOPED_TRACE("window " + std::to_string(w));
      EXPECT_EQ(attend(w), plain);
    }
    expect_close(plain, run(c, in).Y.to_vector(), 1e-14, "against the composed plain run");
  }
}

TEST(MultiHead, OneHeadEqualsSingleHead) {
  for (const Case& c : {Case{"2d", 0, 5, 4, 4, 3, {.rope = true, .need_weights = true}, true},
                        Case{"3d_window", 2, 4, 3, 2, 4, {.window = 2, .need_weights = true}, false}}) {
    SCOPED_TRACE(c.name);
    const auto in = make_inputs(c);
    const Tensor W_O = c.w_o ? in[4] : Tensor();
    const auto s = tg::single_head_attention(in[0], in[1], in[2], in[3], W_O, c.o);
    const auto m = tg::multi_head_attention(in[0], in[1], in[2], in[3], W_O, c.o);
    EXPECT_EQ(m.Y.shape(), s.Y.shape());
    EXPECT_EQ(m.A.numel(), s.A.numel());
    EXPECT_EQ(m.A.rank(), s.A.rank() + 1);  // the head axis, of size 1
    expect_close(m.Y.to_vector(), s.Y.to_vector(), 1e-14, "Y");
    expect_close(m.A.to_vector(), s.A.to_vector(), 1e-14, "A");
  }
}

tg::ScalarFunction loss_fn(const Case& c) {
  return [c](const std::vector<Tensor>& in) { return tg::attention_loss(run(c, in).Y); };
}

TEST(Attention, GradcheckOfLossEveryInput) {
  tg::GradcheckOptions o;
  o.warn_vacuous = false;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const tg::GradcheckResult r = tg::gradcheck(loss_fn(c), make_inputs(c), o);
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_FALSE(r.vacuous);
    EXPECT_TRUE(r.deterministic);
  }
}

// dL from the model's backward against central differences of the loop reference.
TEST(Attention, GradientsMatchReferenceFiniteDifferences) {
  const char* names[] = {"X", "W_Q", "W_K", "W_V", "W_O"};
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto in = make_inputs(c);
    for (Tensor& t : in) t.set_requires_grad();
    tg::attention_loss(run(c, in).Y).backward();
    auto v = values(in);
    for (std::size_t k = 0; k < in.size(); ++k) {
      const Vec g = in[k].grad().to_vector();
      for (std::size_t e : {std::size_t{0}, g.size() / 2, g.size() - 1}) {
        SCOPED_TRACE(std::string(names[k]) + " element " + std::to_string(e));
        const double x0 = v[k][e], eps = 1e-5;
        v[k][e] = x0 + eps;
        const double up = ref_loss(c, v);
        v[k][e] = x0 - eps;
        const double down = ref_loss(c, v);
        v[k][e] = x0;
        const double fd = (up - down) / (2 * eps);
        EXPECT_NEAR(g[e], fd, 1e-7 * std::max(1.0, std::fabs(fd)));
      }
    }
  }
}

TEST(Attention, GradgradcheckSmall) {
  for (const Case& c : {Case{"single", 0, 3, 3, 2, 2, {.rope = true}, true},
                        Case{"multi", 2, 3, 2, 4, 2, {.heads = 2, .window = 2}, true}}) {
    SCOPED_TRACE(c.name);
    const tg::GradcheckResult r = tg::gradgradcheck(loss_fn(c), make_inputs(c, 11));
    EXPECT_TRUE(r.passed) << r.message;
    EXPECT_FALSE(r.vacuous);
  }
}

TEST(Attention, Float32MatchesFloat64) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto in64 = make_inputs(c);
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) in32.push_back(t.detach().to(tg::Dtype::f32).set_requires_grad());
    const auto o32 = run(c, in32), o64 = run(c, in64);
    ASSERT_EQ(o32.Y.dtype(), tg::Dtype::f32);
    ASSERT_EQ(o32.A.dtype(), tg::Dtype::f32);
    expect_close(o32.Y.to_vector(), o64.Y.to_vector(), 1e-5, "Y");
    expect_close(o32.A.to_vector(), o64.A.to_vector(), 1e-5, "A");
    tg::attention_loss(o32.Y).backward();
    auto in = in64;
    for (Tensor& t : in) t = t.detach().clone().set_requires_grad();
    tg::attention_loss(run(c, in).Y).backward();
    for (std::size_t k = 0; k < in.size(); ++k)
      expect_close(in32[k].grad().to_vector(), in[k].grad().to_vector(), 1e-4, "gradient");
  }
}

TEST(QKVAttention, ParametersAreTheWeights) {
  for (bool proj : {false, true}) {
    SCOPED_TRACE(proj ? "with W_O" : "without W_O");
    tg::Rng rng(9);
    const tg::nn::QKVAttention layer(4, 6, 2, {.heads = 2}, proj, rng);
    const auto p = layer.parameters();
    ASSERT_EQ(p.size(), proj ? 4u : 3u);
    const Tensor* w[] = {&layer.W_Q, &layer.W_K, &layer.W_V, &layer.W_O};
    const tg::Shape s[] = {{4, 6}, {4, 6}, {4, 2}, {2, 2}};
    for (std::size_t k = 0; k < p.size(); ++k) {
      EXPECT_EQ(p[k].impl_ptr(), w[k]->impl_ptr()) << k;
      EXPECT_EQ(p[k].shape(), s[k]) << k;
      EXPECT_TRUE(p[k].requires_grad()) << k;
      EXPECT_TRUE(p[k].is_leaf()) << k;
    }
    EXPECT_EQ(layer.W_O.defined(), proj);
  }
}

TEST(QKVAttention, ForwardUsesReplacedWeightsAndBackwardAccumulates) {
  const Case c{"layer", 2, 4, 4, 4, 4, {.heads = 2, .rope = true}, true};
  tg::Rng rng(10);
  tg::nn::QKVAttention layer(4, 4, 4, c.o, true, rng);
  auto in = make_inputs(c, 12);
  layer.W_Q = in[1].set_requires_grad();
  layer.W_K = in[2].set_requires_grad();
  layer.W_V = in[3].set_requires_grad();
  layer.W_O = in[4].set_requires_grad();
  EXPECT_EQ(layer.parameters()[0].to_vector(), in[1].to_vector());
  expect_close(layer.forward(in[0]).Y.to_vector(), reference(c, values(in)).Y, 1e-12, "Y");

  const auto p = layer.parameters();
  const auto once = tg::grad({tg::attention_loss(layer.forward(in[0]).Y)}, p);
  for (int pass = 1; pass <= 2; ++pass) {
    tg::attention_loss(layer.forward(in[0]).Y).backward();
    for (std::size_t k = 0; k < p.size(); ++k) {
      SCOPED_TRACE("pass " + std::to_string(pass) + " parameter " + std::to_string(k));
      ASSERT_TRUE(p[k].grad().defined());
      Vec want = once[k].to_vector();
      for (double& g : want) g *= pass;
      expect_close(p[k].grad().to_vector(), want, 1e-14, "accumulated grad");
    }
  }
}

}  // namespace
