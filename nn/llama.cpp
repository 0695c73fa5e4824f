#include <tapegrad/nn/llama.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/ops/ops.h>

namespace tg::nn {

namespace {

const LlamaConfig& validated(const LlamaConfig& c) {
  if (c.vocab_size < 1 || c.hidden_size < 1 || c.intermediate_size < 1 ||
      c.num_hidden_layers < 1 || c.num_attention_heads < 1 || c.num_key_value_heads < 1 ||
      c.max_position_embeddings < 1)
    throw ValueError("Llama: vocab_size, hidden_size, intermediate_size, num_hidden_layers, "
                     "num_attention_heads, num_key_value_heads and max_position_embeddings must "
                     "be >= 1");
  if (c.hidden_size % c.num_attention_heads != 0)
    throw ValueError("Llama: num_attention_heads = " + std::to_string(c.num_attention_heads) +
                     " does not divide hidden_size = " + std::to_string(c.hidden_size));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw ValueError("Llama: num_key_value_heads = " + std::to_string(c.num_key_value_heads) +
                     " does not divide num_attention_heads = " +
                     std::to_string(c.num_attention_heads));
  if (c.head_dim() % 2 != 0)
    throw ValueError("Llama: head_dim = hidden_size / num_attention_heads = " +
                     std::to_string(c.head_dim()) + " must be even (RoPE pairs its halves)");
  if (!(c.rms_norm_eps >= 0) || !(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    throw ValueError("Llama: rms_norm_eps must be >= 0 and rope_theta finite and > 0");
  if (!is_floating(c.dtype)) throw ValueError("Llama: dtype must be float32 or float64");
  return c;
}

// Hugging Face's initializer_range: every weight N(0, 0.02^2).
constexpr double kInitializerRange = 0.02;

}  // namespace

std::vector<Tensor> rope_tables(int64_t start, int64_t T, int64_t head_dim, double theta,
                                Dtype dtype) {
  if (head_dim % 2 != 0)
    throw ValueError("rope_tables: head_dim " + std::to_string(head_dim) + " must be even");
  const int64_t half = head_dim / 2;
  Tensor cos({T, half}, dtype), sin({T, half}, dtype);
  dispatch(dtype, [&]<class T_>() {
    T_* pc = cos.data<T_>();
    T_* ps = sin.data<T_>();
    for (int64_t i = 0; i < half; ++i) {
      // theta^(-2i/d) as Hugging Face computes inv_freq, in the tables' dtype
      const T_ inv_freq = T_(1) / std::pow(static_cast<T_>(theta),
                                           static_cast<T_>(2 * i) / static_cast<T_>(head_dim));
      for (int64_t m = 0; m < T; ++m) {
        const T_ a = static_cast<T_>(start + m) * inv_freq;
        pc[m * half + i] = std::cos(a);
        ps[m * half + i] = std::sin(a);
      }
    }
  });
  return {cos, sin};
}

AttentionOutput llama_attention(const Tensor& X, const std::vector<Tensor>& W,
                                const LlamaConfig& c) {
  const int64_t H = c.num_attention_heads, H_kv = c.num_key_value_heads, d = c.head_dim();
  if (X.rank() != 3 || W.size() != 4 || X.size(-1) != c.hidden_size ||
      W[0].shape() != Shape{c.hidden_size, H * d} || W[1].shape() != Shape{c.hidden_size, H_kv * d} ||
      W[2].shape() != W[1].shape() || W[3].shape() != Shape{H * d, c.hidden_size})
    throw ShapeError("llama_attention: X " + X.shape().str() +
                     " and W_Q, W_K, W_V, W_O must be (B, T, C), (C, H d), (C, H_kv d) twice and "
                     "(H d, C) for C = " + std::to_string(c.hidden_size) + ", H = " +
                     std::to_string(H) + ", H_kv = " + std::to_string(H_kv));
  const std::vector<Tensor> table = rope_tables(0, X.size(1), d, c.rope_theta, X.dtype());
  AttentionOutput out;
  out.Q = split_heads(rotate_heads(matmul(X, W[0]), H, table), H);  // (B, H, T, d)
  out.K = split_heads(repeat_kv(rotate_heads(matmul(X, W[1]), H_kv, table), H_kv, H),
                      H);                                            // (B, H, T, d)
  out.V = split_heads(repeat_kv(matmul(X, W[2]), H_kv, H), H);       // (B, H, T, d)
  const AttentionWeights w =
      causal_attention_weights(out.Q, out.K, 1.0 / std::sqrt(static_cast<double>(d)));
  out.S = w.S;                                              // (B, H, T, T)
  out.A = w.A;                                              // (B, H, T, T)
  out.W_O = W[3];
  out.Y = matmul(merge_heads(matmul(w.A, out.V)), W[3]);  // (B, T, C)
  return out;
}

LlamaAttention::LlamaAttention(const LlamaConfig& c, Rng& init_rng)
    : q_proj(c.hidden_size, c.num_attention_heads * c.head_dim(), false, init_rng, c.dtype,
             kInitializerRange),
      k_proj(c.hidden_size, c.num_key_value_heads * c.head_dim(), false, init_rng, c.dtype,
             kInitializerRange),
      v_proj(c.hidden_size, c.num_key_value_heads * c.head_dim(), false, init_rng, c.dtype,
             kInitializerRange),
      o_proj(c.num_attention_heads * c.head_dim(), c.hidden_size, false, init_rng, c.dtype,
             kInitializerRange),
      heads_(c.num_attention_heads),
      kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim()),
      theta_(c.rope_theta) {
  register_module("q_proj", q_proj);
  register_module("k_proj", k_proj);
  register_module("v_proj", v_proj);
  register_module("o_proj", o_proj);
}

Tensor rotate_heads(const Tensor& p, int64_t heads, const std::vector<Tensor>& table) {
  const int64_t B = p.size(0), T = p.size(1), d = p.size(-1) / heads;
  Tensor split = reshape(p, {B, T, heads, d});                              // (B, T, heads, d)
  return reshape(rotary(split, table[0], table[1]), {B, T, heads * d});  // (B, T, heads d)
}

Tensor repeat_kv(const Tensor& kv, int64_t kv_heads, int64_t heads) {
  if (kv.rank() != 3 || kv_heads < 1 || kv.size(-1) % kv_heads != 0 || heads % kv_heads != 0)
    throw ShapeError("repeat_kv: kv " + kv.shape().str() + " must be (B, T, H_kv d) with " +
                     std::to_string(kv_heads) + " key/value heads dividing " +
                     std::to_string(heads) + " query heads");
  const int64_t r = heads / kv_heads;
  if (r == 1) return kv;
  const int64_t B = kv.size(0), T = kv.size(1), d = kv.size(-1) / kv_heads;
  Tensor split = reshape(kv, {B * T, kv_heads, 1, d});  // (B T, H_kv, 1, d)
  return reshape(expand(split, {B * T, kv_heads, r, d}),
                 {B, T, heads * d});  // (B, T, H d), head j r + i = kv head j
}

Tensor LlamaAttention::forward(const Tensor& x, int64_t start, Tensor* k_cache,
                               Tensor* v_cache) const {
  const int64_t T = x.size(1);
  const std::vector<Tensor> table = rope_tables(start, T, head_dim_, theta_, x.dtype());
  Tensor q = rotate_heads(q_proj(x), heads_, table);     // (B, T, H d)
  Tensor k = rotate_heads(k_proj(x), kv_heads_, table);  // (B, T, H_kv d)
  Tensor v = v_proj(x);                                  // (B, T, H_kv d)
  int64_t cached = 0;
  if (k_cache != nullptr && v_cache != nullptr) {
    cached = k_cache->defined() ? k_cache->size(1) : 0;
    *k_cache = k_cache->defined() ? cat({*k_cache, k}, 1) : k;  // (B, T_all, H_kv d)
    *v_cache = v_cache->defined() ? cat({*v_cache, v}, 1) : v;
    k = *k_cache;
    v = *v_cache;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  Tensor y = causal_attention_heads(q, repeat_kv(k, kv_heads_, heads_),
                                    repeat_kv(v, kv_heads_, heads_), heads_, scale, 0,
                                    cached);  // (B, T, H d)
  return o_proj(y);                           // (B, T, C)
}

LlamaMLP::LlamaMLP(const LlamaConfig& c, Rng& init_rng)
    : gate_proj(c.hidden_size, c.intermediate_size, false, init_rng, c.dtype, kInitializerRange),
      up_proj(c.hidden_size, c.intermediate_size, false, init_rng, c.dtype, kInitializerRange),
      down_proj(c.intermediate_size, c.hidden_size, false, init_rng, c.dtype, kInitializerRange) {
  register_module("gate_proj", gate_proj);
  register_module("up_proj", up_proj);
  register_module("down_proj", down_proj);
}

Tensor LlamaMLP::forward(const Tensor& x) const {
  return down_proj(mul(silu(gate_proj(x)), up_proj(x)));  // (B, T, I) -> (B, T, C)
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, Rng& init_rng)
    : self_attn(c, init_rng),
      mlp(c, init_rng),
      input_layernorm(c.hidden_size, c.rms_norm_eps, true, c.dtype),
      post_attention_layernorm(c.hidden_size, c.rms_norm_eps, true, c.dtype) {
  register_module("self_attn", self_attn);
  register_module("mlp", mlp);
  register_module("input_layernorm", input_layernorm);
  register_module("post_attention_layernorm", post_attention_layernorm);
}

Tensor LlamaDecoderLayer::forward(const Tensor& x_in, int64_t start, Tensor* k_cache,
                                  Tensor* v_cache) const {
  Tensor x = add(x_in, self_attn.forward(input_layernorm(x_in), start, k_cache, v_cache));
  return add(x, mlp(post_attention_layernorm(x)));  // (B, T, C)
}

Llama::Model::Model(const LlamaConfig& c, Rng& init_rng)
    : embed_tokens(c.vocab_size, c.hidden_size, init_rng, c.dtype, kInitializerRange),
      norm(c.hidden_size, c.rms_norm_eps, true, c.dtype) {
  register_module("embed_tokens", embed_tokens);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers.append(std::make_unique<LlamaDecoderLayer>(c, init_rng));
  register_module("layers", layers);
  register_module("norm", norm);
}

Llama::Llama(const LlamaConfig& config, Rng& init_rng)
    : config_(validated(config)), model(config_, init_rng) {
  register_module("model", model);
  if (config_.tie_word_embeddings) return;
  lm_head = std::make_unique<Linear>(config_.hidden_size, config_.vocab_size, false, init_rng,
                                     config_.dtype, kInitializerRange);
  register_module("lm_head", *lm_head);
}

void Llama::check_idx(const Tensor& idx, int64_t start, const char* who) const {
  if (idx.rank() != 2)
    throw ShapeError(std::string(who) + ": idx " + idx.shape().str() + " must be (B, T)");
  const int64_t T = idx.size(1);
  if (start + T > config_.max_position_embeddings)
    throw ValueError(std::string(who) + ": sequence length " + std::to_string(start + T) +
                     " exceeds max_position_embeddings " +
                     std::to_string(config_.max_position_embeddings));
}

Tensor Llama::run(const Tensor& idx, int64_t start, KVCache* cache, const char* who) const {
  check_idx(idx, start, who);
  Tensor x = model.embed_tokens(idx);  // (B, T, C)
  for (size_t l = 0; l < model.layers.size(); ++l) {
    const LlamaDecoderLayer* layer = &model.layers[l];
    if (cache)
      x = layer->forward(x, start, &cache->k[l], &cache->v[l]);
    else if (config_.checkpoint_blocks)
      x = checkpoint([layer](const std::vector<Tensor>& in) { return (*layer)(in[0]); }, {x});
    else
      x = (*layer)(x);
  }
  Tensor h = model.norm(x);                                            // (B, T, C)
  return lm_head ? (*lm_head)(h) : matmul(h, model.embed_tokens.weight, false, true);  // (B, T, V)
}

const LlamaDecoderLayer& Llama::decoder_layer(int64_t layer, const char* who) const {
  if (layer < 0 || layer >= config_.num_hidden_layers)
    throw ValueError(std::string(who) + ": layer " + std::to_string(layer) + " outside [0, " +
                     std::to_string(config_.num_hidden_layers) + ")");
  return model.layers[layer];
}

Tensor Llama::attention_input(const Tensor& idx, int64_t layer) const {
  const LlamaDecoderLayer& target = decoder_layer(layer, "Llama::attention_input");
  check_idx(idx, 0, "Llama::attention_input");
  Tensor x = model.embed_tokens(idx);  // (B, T, C)
  for (int64_t l = 0; l < layer; ++l) x = model.layers[l].forward(x);
  return target.input_layernorm(x);  // (B, T, C)
}

std::vector<Tensor> Llama::attention_weights(int64_t layer) const {
  const LlamaAttention& attn = decoder_layer(layer, "Llama::attention_weights").self_attn;
  return {transpose(attn.q_proj.weight), transpose(attn.k_proj.weight),
          transpose(attn.v_proj.weight), transpose(attn.o_proj.weight)};  // x W = proj(x)
}

Tensor Llama::forward(const Tensor& idx) const { return run(idx, 0, nullptr, "Llama::forward"); }

Tensor Llama::loss(const Tensor& idx, const Tensor& targets) const {
  if (targets.shape() != idx.shape())
    throw ShapeError("Llama::loss: targets " + targets.shape().str() +
                     " must have idx's shape " + idx.shape().str());
  Tensor out = forward(idx);  // (B, T, V)
  return cross_entropy(reshape(out, {-1, config_.vocab_size}), reshape(targets, {-1}), -1);
}

Tensor Llama::forward_cached(const Tensor& idx, KVCache& cache) const {
  NoGradGuard no_grad;
  const int64_t start = cache.length();
  if (start > 0 && idx.rank() == 2 && idx.size(0) != cache.k[0].size(0))
    throw ShapeError("Llama::forward_cached: idx " + idx.shape().str() +
                     " has another batch than the cache " + cache.k[0].shape().str());
  cache.k.resize(model.layers.size());
  cache.v.resize(model.layers.size());
  return run(idx, start, &cache, "Llama::forward_cached");  // (B, T_new, V)
}

}  // namespace tg::nn
