#include <tapegrad/nn/gpt.h>

#include <cmath>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/ops/ops.h>

namespace tg::nn {

namespace {

const GPTConfig& validated(const GPTConfig& c) {
  if (c.vocab_size < 1 || c.block_size < 1 || c.n_layer < 1 || c.n_head < 1 || c.n_embd < 1)
    throw ValueError("GPT: vocab_size, block_size, n_layer, n_head and n_embd must be >= 1");
  if (c.n_embd % c.n_head != 0)
    throw ValueError("GPT: n_head = " + std::to_string(c.n_head) +
                     " does not divide n_embd = " + std::to_string(c.n_embd));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw ValueError("GPT: dropout = " + std::to_string(c.dropout) + " is outside [0, 1)");
  if (!is_floating(c.dtype)) throw ValueError("GPT: dtype must be float32 or float64");
  return c;
}

// nanoGPT's init of the weights, N(0, 0.02^2), and its scaled one of the projections into the
// residual stream.
constexpr double kNanoGptStd = 0.02;
double c_proj_std(const GPTConfig& c) { return 0.02 / std::sqrt(2.0 * c.n_layer); }

// The scores' scale, 1 / sqrt(d) for heads of d = C / H columns.
double head_scale(int64_t n_embd, int64_t n_head) {
  return 1.0 / std::sqrt(static_cast<double>(n_embd / n_head));
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c, Rng& init_rng, Rng& dropout_rng)
    : c_attn(c.n_embd, 3 * c.n_embd, c.bias, init_rng, c.dtype, kNanoGptStd),
      c_proj(c.n_embd, c.n_embd, c.bias, init_rng, c.dtype, c_proj_std(c)),
      resid_dropout(c.dropout, dropout_rng),
      n_head_(c.n_head),
      n_embd_(c.n_embd) {
  validated(c);
  register_module("c_attn", c_attn);
  register_module("c_proj", c_proj);
  register_module("resid_dropout", resid_dropout);
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  // q, k, v are the thirds of c_attn's output, read in place (no split copied either way)
  const double scale = head_scale(n_embd_, n_head_);
  Tensor y = causal_attention_qkv(c_attn(x), n_head_, scale);  // (B, T, 3C) -> (B, T, C)
  return resid_dropout(c_proj(y));                             // (B, T, C)
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, Tensor& k_cache,
                                           Tensor& v_cache) const {
  const std::vector<Tensor> qkv = split(c_attn(x), n_embd_, -1);     // 3 x (B, T_new, C)
  k_cache = k_cache.defined() ? cat({k_cache, qkv[1]}, 1) : qkv[1];  // (B, T_all, C)
  v_cache = v_cache.defined() ? cat({v_cache, qkv[2]}, 1) : qkv[2];  // (B, T_all, C)
  // The new positions are the last T_new of T_all: the fused op with the mask shifted by the
  // T_all - T_new cached ones.
  const int64_t cached = k_cache.size(1) - x.size(1);
  Tensor y = causal_attention_heads(qkv[0], k_cache, v_cache, n_head_,
                                    head_scale(n_embd_, n_head_), 0, cached);  // (B, T_new, C)
  return resid_dropout(c_proj(y));                                             // (B, T_new, C)
}

MLP::MLP(const GPTConfig& c, Rng& init_rng, Rng& dropout_rng)
    : c_fc(c.n_embd, 4 * c.n_embd, c.bias, init_rng, c.dtype, kNanoGptStd),
      c_proj(4 * c.n_embd, c.n_embd, c.bias, init_rng, c.dtype, c_proj_std(c)),
      dropout(c.dropout, dropout_rng),
      gelu_(c.gelu) {
  register_module("c_fc", c_fc);
  register_module("c_proj", c_proj);
  register_module("dropout", dropout);
}

Tensor MLP::forward(const Tensor& x) const {
  const auto approximate = gelu_ == GeluKind::tanh ? GeluApproximate::tanh : GeluApproximate::none;
  Tensor h = gelu(c_fc(x), approximate);  // (B, T, 4C)
  return dropout(c_proj(h));              // (B, T, C)
}

Block::Block(const GPTConfig& c, Rng& init_rng, Rng& dropout_rng)
    : ln_1(c.n_embd, c.bias, c.dtype), attn(c, init_rng, dropout_rng) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  if (c.attention_only) return;
  ln_2 = std::make_unique<LayerNorm>(c.n_embd, c.bias, c.dtype);
  mlp = std::make_unique<MLP>(c, init_rng, dropout_rng);
  register_module("ln_2", *ln_2);
  register_module("mlp", *mlp);
}

Tensor Block::forward(const Tensor& x_in) const {
  Tensor x = add(x_in, attn(ln_1(x_in)));   // (B, T, C)
  if (mlp) x = add(x, (*mlp)((*ln_2)(x)));  // (B, T, C)
  return x;
}

Tensor Block::forward_cached(const Tensor& x_in, Tensor& k_cache, Tensor& v_cache) const {
  Tensor x = add(x_in, attn.forward_cached(ln_1(x_in), k_cache, v_cache));  // (B, T_new, C)
  if (mlp) x = add(x, (*mlp)((*ln_2)(x)));                                  // (B, T_new, C)
  return x;
}

GPT::Transformer::Transformer(const GPTConfig& c, Rng& init_rng, Rng& dropout_rng)
    : wte(c.vocab_size, c.n_embd, init_rng, c.dtype, kNanoGptStd),
      wpe(c.block_size, c.n_embd, init_rng, c.dtype, kNanoGptStd),
      drop(c.dropout, dropout_rng),
      ln_f(c.n_embd, c.bias, c.dtype) {
  register_module("wte", wte);
  register_module("wpe", wpe);
  register_module("drop", drop);
  for (int64_t i = 0; i < c.n_layer; ++i)
    h.append(std::make_unique<Block>(c, init_rng, dropout_rng));
  register_module("h", h);
  register_module("ln_f", ln_f);
}

GPT::GPT(const GPTConfig& config, Rng& init_rng)
    : config_(validated(config)), transformer(config_, init_rng, dropout_rng_) {
  register_module("transformer", transformer);
}

Tensor GPT::embed(const Tensor& idx, int64_t start, const char* who) const {
  if (idx.rank() != 2)
    throw ShapeError(std::string(who) + ": idx " + idx.shape().str() + " must be (B, T)");
  const int64_t T = idx.size(1);
  if (start + T > config_.block_size)
    throw ValueError(std::string(who) + ": sequence length " + std::to_string(start + T) +
                     " exceeds block_size " + std::to_string(config_.block_size));
  std::vector<int64_t> positions(T);
  for (int64_t t = 0; t < T; ++t) positions[t] = start + t;
  Tensor tok_emb = transformer.wte(idx);                           // (B, T, C)
  Tensor pos_emb = transformer.wpe(from_indices(positions, {T}));  // (T, C)
  return transformer.drop(add(tok_emb, pos_emb));                  // (B, T, C)
}

Tensor GPT::logits(const Tensor& x) const {
  Tensor h = transformer.ln_f(x);                         // (B, T, C)
  return matmul(h, transformer.wte.weight, false, true);  // (B, T, V): lm_head tied to wte
}

namespace {
void check_layer(int64_t layer, int64_t n_layer, const char* who) {
  if (layer < 0 || layer >= n_layer)
    throw ValueError(std::string(who) + ": layer " + std::to_string(layer) + " outside [0, " +
                     std::to_string(n_layer) + ")");
}
}  // namespace

Tensor GPT::attention_input(const Tensor& idx, int64_t layer) const {
  check_layer(layer, config_.n_layer, "GPT::attention_input");
  Tensor x = embed(idx, 0, "GPT::attention_input");  // (B, T, C)
  for (int64_t l = 0; l < layer; ++l) x = transformer.h[l](x);
  return transformer.h[layer].ln_1(x);  // (B, T, C)
}

std::vector<Tensor> GPT::attention_weights(int64_t layer) const {
  check_layer(layer, config_.n_layer, "GPT::attention_weights");
  if (config_.bias)
    throw ValueError("GPT::attention_weights: the model has biases; the lesson's attention has "
                     "none (train with bias off)");
  const CausalSelfAttention& attn = transformer.h[layer].attn;
  const int64_t C = config_.n_embd;
  std::vector<Tensor> w;
  for (int64_t k = 0; k < 3; ++k) w.push_back(transpose(narrow(attn.c_attn.weight, 0, k * C, C)));
  w.push_back(transpose(attn.c_proj.weight));  // y W_O = c_proj(y)
  return w;  // W_Q, W_K, W_V, W_O: (C, C) each
}

Tensor GPT::forward(const Tensor& idx) const {
  Tensor x = embed(idx, 0, "GPT::forward");  // (B, T, C)
  for (const auto& block : transformer.h) {
    if (!config_.checkpoint_blocks) {
      x = (*block)(x);
      continue;
    }
    const Block* b = block.get();
    x = checkpoint([b](const std::vector<Tensor>& in) { return (*b)(in[0]); }, {x},
                   {.rngs = {&dropout_rng_}});
  }
  return logits(x);  // (B, T, V)
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) const {
  if (targets.shape() != idx.shape())
    throw ShapeError("GPT::loss: targets " + targets.shape().str() + " must have idx's shape " +
                     idx.shape().str());
  Tensor out = forward(idx);  // (B, T, V)
  return cross_entropy(reshape(out, {-1, config_.vocab_size}), reshape(targets, {-1}), -1);
}

Tensor GPT::forward_cached(const Tensor& idx, KVCache& cache) const {
  NoGradGuard no_grad;
  const int64_t start = cache.length();
  if (start > 0 && idx.rank() == 2 && idx.size(0) != cache.k[0].size(0))
    throw ShapeError("GPT::forward_cached: idx " + idx.shape().str() +
                     " has another batch than the cache " + cache.k[0].shape().str());
  Tensor x = embed(idx, start, "GPT::forward_cached");  // (B, T_new, C)
  const size_t L = transformer.h.size();
  cache.k.resize(L);
  cache.v.resize(L);
  for (size_t l = 0; l < L; ++l) x = transformer.h[l].forward_cached(x, cache.k[l], cache.v[l]);
  return logits(x);  // (B, T_new, V)
}

}  // namespace tg::nn
