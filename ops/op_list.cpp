// The rows of the op list, built at two sizes: the benchmarks' attention-like ones (B H = 8 entries
// of T = 256 rows of d = 64, or T x T scores; the MNIST Net's feature maps for the image ops) and
// small ones of the same form for the tests that run every op (the PyTorch agreement test).

#include <tapegrad/ops/op_list.h>

#include <cmath>

#include <tapegrad/ops/ops.h>

namespace tg {

namespace {

using X = const std::vector<Tensor>&;

// The sizes of the rows' inputs.
struct Sizes {
  int64_t bh, t, d, v;  // attention: B H entries of T rows of d; a vocabulary of V
  int64_t b, bt, emb;   // a GPT batch of B sequences of T tokens, an embedding's width
  int64_t n, c, c_in, hw, conv_hw;  // images: batch, channels, conv's input channels, map sides
};

constexpr Sizes kBench{.bh = 8, .t = 256, .d = 64, .v = 65, .b = 12, .bt = 64, .emb = 128,
                       .n = 64, .c = 64, .c_in = 32, .hw = 24, .conv_hw = 26};
// (8 tokens over a vocabulary of 7: embedding's gradient meets a repeated token; the
// PyTorch side, tests/op_list_reference.py, knows bh, d, b and bt.)
constexpr Sizes kSmall{.bh = 2, .t = 5, .d = 8, .v = 7, .b = 2, .bt = 4, .emb = 3,
                       .n = 2, .c = 16, .c_in = 3, .hw = 4, .conv_hw = 5};

// Fixed index inputs for the index ops along an axis of size n (or a vocabulary of n), in [0, n).
Tensor axis_indices(const Shape& s, int64_t n) {
  std::vector<int64_t> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 7919) % n);
  return from_indices(v, s);
}

// Fixed rotary tables (T, half): the cosines or sines of angles t / (i + 1).
Tensor sample_angles(int64_t T, int64_t half, bool cosine, Dtype dtype) {
  std::vector<double> v(T * half);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(t) / static_cast<double>(i + 1);
      v[t * half + i] = cosine ? std::cos(a) : std::sin(a);
    }
  return from_vector(v, {T, half}, dtype);
}

// A fixed mask for where and masked_fill: two of every three elements hold.
Tensor sample_mask(const Shape& s) {
  std::vector<bool> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (i * 7919) % 3 != 0;
  return from_bools(v, s);
}

std::vector<OpInfo> rows(const Sizes& z) {
  const OpKind unary = OpKind::unary, binary = OpKind::binary, other = OpKind::other;
  const OpDomain real = OpDomain::real, positive = OpDomain::positive;
  const int64_t kBH = z.bh, kT = z.t, kD = z.d, kV = z.v;
  const Shape act{kBH, kT, kD}, scores{kBH, kT, kT};
  const Shape maps{z.n, z.c, z.hw, z.hw};  // the pooling and norm ops' feature maps
  return {
      {"abs", unary, OpDomain::nonzero, {act}, [=](X x) { return abs(x[0]); }},
      {"add", binary, real, {act, {kT, kD}}, [=](X x) { return add(x[0], x[1]); }},
      {"add_mask", other, real, {scores},
       [=](X x) { return add_mask(x[0], causal_mask(x[0].size(-1), x[0].dtype())); }},
      {"amax", other, real, {scores}, [=](X x) { return amax(x[0], -1); }},
      {"amin", other, real, {scores}, [=](X x) { return amin(x[0], -2, true); }},
      {"avg_pool1d", other, real, {{z.n, z.c, kT}}, [=](X x) { return avg_pool1d(x[0], 2); }},
      {"avg_pool2d", other, real, {maps}, [=](X x) { return avg_pool2d(x[0], 2); }},
      // A training step's batch_norm on the MNIST Net's feature maps (fresh running stats).
      {"batch_norm", other, real, {maps, {z.c}, {z.c}},
       [=](X x) {
         const Tensor rm = zeros({z.c}, x[0].dtype()), rv = ones({z.c}, x[0].dtype());
         return batch_norm(x[0], rm, rv, x[1], x[2], true);
       }},
      {"binary_cross_entropy_with_logits", other, real, {act, act},
       [=](X x) { return binary_cross_entropy_with_logits(x[0], sigmoid(x[1])); }},
      {"broadcast_to", other, real, {{kT, kD}},
       [=](X x) { return broadcast_to(x[0], {kBH, kT, kD}); }},
      {"cat", other, real, {act, act}, [=](X x) { return cat({x[0], x[1]}, -1); }},
      {"causal_attention", other, real, {act, act, act},
       [=](X x) { return causal_attention(x[0], x[1], x[2], 0.125); }},
      {"causal_attention_heads", other, real, {{2, kT, 4 * kD}, {2, kT, 4 * kD}, {2, kT, 4 * kD}},
       [=](X x) { return causal_attention_heads(x[0], x[1], x[2], 4, 0.125); }},
      {"causal_attention_qkv", other, real, {{2, kT, 3 * 4 * kD}},
       [=](X x) { return causal_attention_qkv(x[0], 4, 0.125); }},
      {"chunk", other, real, {act}, [=](X x) { return chunk(x[0], 3, -1)[1]; }},
      {"clamp", unary, real, {act}, [=](X x) { return clamp(x[0], -0.5, 0.5); }},
      // pytorch/examples' MNIST Net: its second convolution (32 -> 64 at 26 x 26, 3 x 3).
      {"conv1d", other, real, {{z.n, z.c_in, kT}, {z.c, z.c_in, 3}, {z.c}},
       [=](X x) { return conv1d(x[0], x[1], x[2]); }},
      {"conv2d", other, real, {{z.n, z.c_in, z.conv_hw, z.conv_hw}, {z.c, z.c_in, 3, 3}, {z.c}},
       [=](X x) { return conv2d(x[0], x[1], x[2]); }},
      {"cross_entropy", other, real, {{z.b * z.bt, kV}},
       [=](X x) { return cross_entropy(x[0], axis_indices({x[0].size(0)}, x[0].size(-1))); }},
      {"cross_entropy_options", other, real, {{z.b, z.bt, kV}},
       [=](X x) {
         std::vector<double> w(kV);
         for (int64_t v = 0; v < kV; ++v) w[v] = 0.5 + static_cast<double>(v % 3);
         return cross_entropy(x[0], axis_indices({z.b, z.bt}, kV),
                              {.weight = from_vector(w, {kV}, x[0].dtype()),
                               .ignore_index = -1,
                               .label_smoothing = 0.1});
       }},
      {"div", binary, positive, {act, act}, [=](X x) { return div(x[0], x[1]); }},
      {"dropout", other, real, {act},
       [=](X x) {
         Rng rng(0);
         return dropout(x[0], 0.1, true, rng);
       },
       // PyTorch draws its masks from its own generator: the tests of tests/index_ops_test.cpp
       // check the mask's statistics, y = x m / (1 - p) and the gradient m / (1 - p).
       "Dropout.* in tests/index_ops_test.cpp"},
      {"embedding", other, real, {{kV, z.emb}},
       [=](X x) { return embedding(axis_indices({z.b, z.bt}, kV), x[0]); }},
      {"erf", unary, real, {act}, [=](X x) { return erf(x[0]); }},
      {"exp", unary, real, {act}, [=](X x) { return exp(x[0]); }},
      {"expand", other, real, {{kT, 1}}, [=](X x) { return expand(x[0], {kBH, -1, kD}); }},
      {"flatten", other, real, {{kBH, kT, kD}}, [=](X x) { return flatten(x[0], 1); }},
      {"gather", other, real, {act},
       [=](X x) { return gather(x[0], -1, axis_indices({kBH, kT, kD / 2}, kD)); }},
      {"gelu", unary, real, {act}, [=](X x) { return gelu(x[0], GeluApproximate::tanh); }},
      {"group_norm", other, real, {maps, {z.c}, {z.c}},
       [=](X x) { return group_norm(x[0], z.c / 8, x[1], x[2]); }},
      // A GRU layer's recurrence: bt steps of a batch of b, hidden d.
      {"gru_scan", other, real, {{z.bt, z.b, 3 * kD}, {3 * kD, kD}, {3 * kD}, {z.b, kD}},
       [=](X x) { return gru_scan(x[0], x[1], x[2], x[3]); }},
      {"index_select", other, real, {act},
       [=](X x) { return index_select(x[0], 1, axis_indices({kT / 2}, kT)); }},
      {"l1_loss", other, real, {act, act}, [=](X x) { return l1_loss(x[0], x[1]); }},
      {"layer_norm", other, real, {act, {kD}, {kD}},
       [=](X x) { return layer_norm(x[0], x[1], x[2]); }},
      {"linear", other, real, {act, {kT, kD}, {kT}},
       [=](X x) { return linear(x[0], x[1], x[2]); }},
      {"log", unary, positive, {act}, [=](X x) { return log(x[0]); }},
      {"log_softmax", other, real, {scores}, [=](X x) { return log_softmax(x[0]); }},
      {"log_softmax_dim", other, real, {scores}, [=](X x) { return log_softmax(x[0], -2); }},
      {"logsumexp", other, real, {scores}, [=](X x) { return logsumexp(x[0], -1); }},
      // An LSTM layer's recurrence: bt steps of a batch of b, hidden d.
      {"lstm_scan", other, real,
       {{z.bt, z.b, 4 * kD}, {4 * kD, kD}, {4 * kD}, {z.b, kD}, {z.b, kD}},
       [=](X x) { return lstm_scan(x[0], x[1], x[2], x[3], x[4]); }},
      {"masked_fill", other, real, {act},
       [=](X x) { return masked_fill(x[0], sample_mask(x[0].shape()), -1.5); }},
      {"matmul", other, real, {act, {kD, kD}}, [=](X x) { return matmul(x[0], x[1]); }},
      {"max", other, real, {scores}, [=](X x) { return max(x[0], -1).values; }},
      {"max_pool1d", other, real, {{z.n, z.c, kT}}, [=](X x) { return max_pool1d(x[0], 2); }},
      {"max_pool2d", other, real, {maps}, [=](X x) { return max_pool2d(x[0], 2); }},
      {"maximum", binary, real, {act, act}, [=](X x) { return maximum(x[0], x[1]); }},
      {"mean", other, real, {act}, [=](X x) { return mean(x[0], -1, true); }},
      {"mean_dims", other, real, {act}, [=](X x) { return mean(x[0], {0, 1}); }},
      {"min", other, real, {scores}, [=](X x) { return min(x[0], -2, true).values; }},
      {"minimum", binary, real, {act, act}, [=](X x) { return minimum(x[0], x[1]); }},
      {"mse_loss", other, real, {act, act}, [=](X x) { return mse_loss(x[0], x[1]); }},
      {"mul", binary, real, {act, act}, [=](X x) { return mul(x[0], x[1]); }},
      {"narrow", other, real, {act}, [=](X x) { return narrow(x[0], -1, kD / 8, kD / 2); }},
      {"nll_loss", other, real, {{z.b * z.bt, kV}},
       [=](X x) {
         return nll_loss(log_softmax(x[0]), axis_indices({x[0].size(0)}, x[0].size(-1)));
       }},
      {"pad", other, real, {act}, [=](X x) { return pad(x[0], {1, 2, 0, 3}); }},
      {"permute", other, real, {{2, kT, 4, kD}}, [=](X x) { return permute(x[0], {0, 2, 1, 3}); }},
      {"pow", unary, positive, {act}, [=](X x) { return pow(x[0], 1.5); }},
      {"relu", unary, OpDomain::nonzero, {act}, [=](X x) { return relu(x[0]); }},
      {"reshape", other, real, {act}, [=](X x) { return reshape(x[0], {-1, kD}); }},
      {"rms_norm", other, real, {act, {kD}}, [=](X x) { return rms_norm(x[0], x[1], 1e-6); }},
      {"rope", other, real, {act}, [=](X x) { return rope(x[0]); }},
      {"rotary", other, real, {{2, kT, 4, kD}},
       [=](X x) { return rotary(x[0], sample_angles(kT, kD / 2, true, x[0].dtype()),
                                sample_angles(kT, kD / 2, false, x[0].dtype())); }},
      {"rsqrt", unary, positive, {act}, [=](X x) { return rsqrt(x[0]); }},
      {"scale", unary, real, {scores}, [=](X x) { return scale(x[0], 0.125); }},
      {"scatter_add", other, real, {act, {kBH, kT, kD / 2}},
       [=](X x) { return scatter_add(x[0], -1, axis_indices({kBH, kT, kD / 2}, kD), x[1]); }},
      {"sigmoid", unary, real, {act}, [=](X x) { return sigmoid(x[0]); }},
      {"silu", unary, real, {act}, [=](X x) { return silu(x[0]); }},
      {"softmax", other, real, {scores}, [=](X x) { return softmax(x[0]); }},
      {"softmax_dim", other, real, {scores}, [=](X x) { return softmax(x[0], -2); }},
      {"softplus", unary, real, {act}, [=](X x) { return softplus(x[0]); }},
      {"split", other, real, {act}, [=](X x) { return split(x[0], kD / 2, -1)[1]; }},
      {"sqrt", unary, positive, {act}, [=](X x) { return sqrt(x[0]); }},
      {"squeeze", other, real, {{kBH, 1, kT, kD}}, [=](X x) { return squeeze(x[0], 1); }},
      {"stack", other, real, {act, act}, [=](X x) { return stack({x[0], x[1]}, 1); }},
      {"sub", binary, real, {act, act}, [=](X x) { return sub(x[0], x[1]); }},
      {"sum", other, real, {act}, [=](X x) { return sum(x[0], -1, true); }},
      {"sum_dims", other, real, {act}, [=](X x) { return sum(x[0], {0, 1}); }},
      {"sum_of_squares", other, real, {act}, [=](X x) { return sum_of_squares(x[0]); }},
      {"sum_to", other, real, {act}, [=](X x) { return sum_to(x[0], {kT, kD}); }},
      {"tanh", unary, real, {act}, [=](X x) { return tanh(x[0]); }},
      {"transpose", other, real, {act}, [=](X x) { return transpose(x[0]); }},
      {"transpose_dims", other, real, {{2, kT, 4, kD}}, [=](X x) { return transpose(x[0], 1, 2); }},
      {"unsqueeze", other, real, {act}, [=](X x) { return unsqueeze(x[0], -2); }},
      {"var", other, real, {act}, [=](X x) { return var(x[0], -1); }},
      {"where", other, real, {act, act},
       [=](X x) { return where(sample_mask(x[0].shape()), x[0], x[1]); }},
  };
}

}  // namespace

Tensor in_domain(const OpInfo& op, const Tensor& x) {
  return op.domain == OpDomain::positive ? add(mul(x, x), 0.5) : x;
}

const std::vector<OpInfo>& op_list() {
  static const std::vector<OpInfo> list = rows(kBench);
  return list;
}

const std::vector<OpInfo>& op_list_small() {
  static const std::vector<OpInfo> list = rows(kSmall);
  return list;
}

}  // namespace tg
