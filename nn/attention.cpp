#include <tapegrad/nn/attention.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/error.h>
#include <tapegrad/ops/ops.h>

namespace tg {

namespace {

void check_options(const AttentionOptions& o, const char* model) {
  if (o.heads < 1)
    throw ValueError(std::string(model) + ": heads must be at least 1, got " +
                     std::to_string(o.heads));
  detail::check_causal_mask(model, o.window);
  if (o.rope && (!std::isfinite(o.rope_base) || o.rope_base <= 0))
    throw ValueError(std::string(model) + ": rope base must be finite and positive, got " +
                     std::to_string(o.rope_base));
}

// Checks every shape up front, so a mistake is reported in the model's terms, not deep in an op.
void check_shapes(const char* model, const Tensor& X, const Tensor& W_Q, const Tensor& W_K,
                  const Tensor& W_V, const Tensor& W_O, int64_t heads, bool rope) {
  for (const Tensor* t : {&X, &W_Q, &W_K, &W_V})
    if (!t->defined()) throw ValueError(std::string(model) + ": X, W_Q, W_K and W_V are required");
  auto fail = [&](const std::string& why) {
    std::string shapes = "X " + X.shape().str() + ", W_Q " + W_Q.shape().str() + ", W_K " +
                         W_K.shape().str() + ", W_V " + W_V.shape().str();
    if (W_O.defined()) shapes += ", W_O " + W_O.shape().str();
    throw ShapeError(std::string(model) + ": " + why + ": " + shapes);
  };
  if (X.rank() != 2 && X.rank() != 3) fail("X must be (T, D) or (B, T, D)");
  if (X.size(-2) < 1) fail("X needs at least one position (T >= 1)");
  const int64_t D = X.size(-1);
  if (W_Q.rank() != 2 || W_K.rank() != 2 || W_V.rank() != 2) fail("weights must be 2-D");
  if (W_Q.size(0) != D || W_K.size(0) != D || W_V.size(0) != D)
    fail("W_Q, W_K and W_V need D = " + std::to_string(D) + " rows");
  if (W_Q.shape() != W_K.shape()) fail("W_Q and W_K must have the same shape (D, d_k)");
  const int64_t d_k = W_Q.size(1), d_v = W_V.size(1);
  if (W_O.defined() && (W_O.rank() != 2 || W_O.size(0) != d_v || W_O.size(1) != d_v))
    fail("W_O must be (d_v, d_v) = (" + std::to_string(d_v) + ", " + std::to_string(d_v) + ")");
  if (d_k % heads != 0 || d_v % heads != 0)
    fail(std::to_string(heads) + " heads must divide d_k = " + std::to_string(d_k) +
         " and d_v = " + std::to_string(d_v));
  if (rope && (d_k / heads) % 2 != 0)
    fail("RoPE rotates pairs, so the head size d_k/H = " + std::to_string(d_k / heads) +
         " must be even");
}

// 1 / sqrt(d) for heads of d columns, or 1 with the scale turned off.
double score_scale(const AttentionOptions& o, int64_t d) {
  return o.scale ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
}

// S = Q K^T (/ sqrt(d));  A = softmax(S + M);  returns A V, with S and A in `out` when the
// options ask for them (else the fused op, which never forms them). Shared by both models.
Tensor attend(const Tensor& Q, const Tensor& K, const Tensor& V, const AttentionOptions& o,
              AttentionOutput& out) {
  const double sc = score_scale(o, Q.size(-1));
  if (!o.need_weights) return causal_attention(Q, K, V, sc, o.window);  // (.., T, d_v)
  const AttentionWeights w = causal_attention_weights(Q, K, sc, o.window);
  out.S = w.S;            // (.., T, T)
  out.A = w.A;            // (.., T, T)
  return matmul(w.A, V);  // (.., T, d_v)
}

}  // namespace

AttentionOutput single_head_attention(const Tensor& X, const Tensor& W_Q, const Tensor& W_K,
                                      const Tensor& W_V, const Tensor& W_O,
                                      const AttentionOptions& o) {
  check_options(o, "single_head_attention");
  if (o.heads != 1)
    throw ValueError("single_head_attention: options.heads must be 1, got " +
                     std::to_string(o.heads) + " (use multi_head_attention)");
  check_shapes("single_head_attention", X, W_Q, W_K, W_V, W_O, 1, o.rope);
  AttentionOutput out;
  out.Q = matmul(X, W_Q);  // (.., T, d_k)
  out.K = matmul(X, W_K);  // (.., T, d_k)
  out.V = matmul(X, W_V);  // (.., T, d_v)
  const Tensor Q = o.rope ? rope(out.Q, o.rope_base) : out.Q;
  const Tensor K = o.rope ? rope(out.K, o.rope_base) : out.K;
  out.Y = attend(Q, K, out.V, o, out);  // (.., T, d_v)
  if (W_O.defined()) out.Y = matmul(out.Y, W_O);
  out.W_O = W_O;
  return out;
}

AttentionOutput multi_head_attention(const Tensor& X, const Tensor& W_Q, const Tensor& W_K,
                                     const Tensor& W_V, const Tensor& W_O,
                                     const AttentionOptions& o) {
  check_options(o, "multi_head_attention");
  check_shapes("multi_head_attention", X, W_Q, W_K, W_V, W_O, o.heads, o.rope);
  const bool batched = X.rank() == 3;
  const int64_t T = X.size(-2), H = o.heads;
  const int64_t d_k = W_Q.size(1), d_v = W_V.size(1);
  AttentionOutput out;
  if (!o.need_weights && !o.rope) {
    // The fused op reads the heads where the projections put them: no split, no merge copies.
    // Q, K and V stay packed, (B, T, H d_h) (or (T, H d_h) for a 2-D X).
    out.Q = matmul(X, W_Q);
    out.K = matmul(X, W_K);
    out.V = matmul(X, W_V);
    const double sc = score_scale(o, d_k / H);
    Tensor Y = causal_attention_heads(out.Q, out.K, out.V, H, sc, o.window);  // (.., T, d_v)
    out.Y = W_O.defined() ? matmul(Y, W_O) : Y;
    out.W_O = W_O;
    return out;
  }
  // Head h owns columns [h d/H, (h+1) d/H); a 2-D X is one batch entry.
  out.Q = split_heads(matmul(X, W_Q), H);  // (B, H, T, d_h)
  out.K = split_heads(matmul(X, W_K), H);  // (B, H, T, d_h)
  out.V = split_heads(matmul(X, W_V), H);  // (B, H, T, d_vh)
  const Tensor Q = o.rope ? rope(out.Q, o.rope_base) : out.Q;
  const Tensor K = o.rope ? rope(out.K, o.rope_base) : out.K;
  const Tensor O = attend(Q, K, out.V, o, out);  // (B, H, T, d_vh)
  Tensor Y = merge_heads(O, batched);            // (.., T, d_v)
  if (W_O.defined()) Y = matmul(Y, W_O);         // (.., T, d_v)
  out.W_O = W_O;
  if (!batched) {
    if (out.A.defined()) out.A = reshape(out.A, {H, T, T});
    if (out.S.defined()) out.S = reshape(out.S, {H, T, T});
    out.Q = reshape(out.Q, {H, T, d_k / H});
    out.K = reshape(out.K, {H, T, d_k / H});
    out.V = reshape(out.V, {H, T, d_v / H});
  }
  out.Y = Y;
  return out;
}

Tensor attention_loss(const Tensor& Y) { return scale(sum_of_squares(Y), 0.5); }

namespace nn {

QKVAttention::QKVAttention(int64_t D, int64_t d_k, int64_t d_v, const AttentionOptions& opts,
                           bool output_proj, Rng& rng, Dtype dtype, double init_std)
    : options(opts) {
  check_options(options, "QKVAttention");
  if (D < 1 || d_k < 1 || d_v < 1)
    throw ValueError("QKVAttention: D, d_k and d_v must be positive, got " + std::to_string(D) +
                     ", " + std::to_string(d_k) + ", " + std::to_string(d_v));
  if (d_k % options.heads != 0 || d_v % options.heads != 0)
    throw ValueError("QKVAttention: " + std::to_string(options.heads) +
                     " heads must divide d_k = " + std::to_string(d_k) + " and d_v = " +
                     std::to_string(d_v));
  if (options.rope && (d_k / options.heads) % 2 != 0)
    throw ValueError("QKVAttention: RoPE rotates pairs, so the head size d_k/H = " +
                     std::to_string(d_k / options.heads) + " must be even");
  W_Q = randn({D, d_k}, rng, dtype, init_std);
  W_K = randn({D, d_k}, rng, dtype, init_std);
  W_V = randn({D, d_v}, rng, dtype, init_std);
  register_parameter("W_Q", W_Q);
  register_parameter("W_K", W_K);
  register_parameter("W_V", W_V);
  if (output_proj) {
    W_O = randn({d_v, d_v}, rng, dtype, init_std);
    register_parameter("W_O", W_O);
  }
}

AttentionOutput QKVAttention::forward(const Tensor& X) const {
  return options.heads == 1 ? single_head_attention(X, W_Q, W_K, W_V, W_O, options)
                            : multi_head_attention(X, W_Q, W_K, W_V, W_O, options);
}

}  // namespace nn

}  // namespace tg
