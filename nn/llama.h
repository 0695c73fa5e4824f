#pragma once
// Llama, the architecture of Hugging Face's LlamaForCausalLM in tapegrad: token embeddings,
// num_hidden_layers pre-norm blocks
//   x = x + self_attn(input_layernorm(x));  x = x + mlp(post_attention_layernorm(x))
// a final RMSNorm and an lm_head (its own weight, or the embedding's when tie_word_embeddings).
// No biases anywhere, no position embeddings: RoPE rotates q and k.
//
//   attention  q = x Wq^T (H heads of d = hidden / H), k = x Wk^T, v = x Wv^T (H_kv heads each,
//              grouped-query: key/value head j serves query heads j r .. j r + r - 1, r = H / H_kv)
//              o = o_proj(causal_softmax(rope(q) rope(k)^T / sqrt(d)) v)
//   RoPE       Hugging Face's half-split form: position m, for i < d / 2, theta_i = base^(-2i / d),
//              rope(x)[i]         = x[i] cos(m theta_i) - x[i + d/2] sin(m theta_i)
//              rope(x)[i + d / 2] = x[i + d/2] cos(m theta_i) + x[i] sin(m theta_i)
//              that is x cos + rotate_half(x) sin with rotate_half(x) = (-x[d/2:], x[:d/2]) (the
//              fused op tg::rotary); its cos/sin tables computed in the model's dtype.
//   mlp        down_proj(silu(gate_proj(x)) * up_proj(x))
//   norms      RMSNorm: x / sqrt(mean(x^2, -1) + rms_norm_eps) * w
//
// Parameter names are Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, ...). Init as
// Hugging Face's _init_weights, drawn from the Rng given to the constructor in named_parameters()
// order (each weight whole, row-major): every weight N(0, 0.02^2), norms 1 (drawing nothing).

#include <cstdint>
#include <memory>
#include <vector>

#include <tapegrad/nn/attention.h>  // AttentionOutput
#include <tapegrad/nn/embedding.h>
#include <tapegrad/nn/gpt.h>  // KVCache
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/module.h>
#include <tapegrad/nn/norm.h>

namespace tg::nn {

/// Hugging Face's LlamaConfig fields (their names), with small defaults.
struct LlamaConfig {
  int64_t vocab_size = 65;
  int64_t hidden_size = 128;
  int64_t intermediate_size = 344;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 4;  // == num_attention_heads: no grouping
  int64_t max_position_embeddings = 64;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  Dtype dtype = get_default_dtype();  // when the config is made
  // Each decoder layer under tg::checkpoint (recomputed in the backward, not kept), as Hugging
  // Face's gradient_checkpointing_enable(). How a run trains: in neither config file.
  bool checkpoint_blocks = false;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

/// The rotary tables of positions [start, start + T): cos and sin of m theta_i, each (T, d/2) in
/// `dtype`, as tg::rotary takes them. Throws ValueError for an odd d.
std::vector<Tensor> rope_tables(int64_t start, int64_t T, int64_t head_dim, double theta,
                                Dtype dtype);

/// The heads of a projection p (B, T, heads d) rotated by RoPE with rope_tables' (cos, sin) of
/// its T positions: (B, T, heads d). Throws as tg::rotary (ShapeError, ValueError).
Tensor rotate_heads(const Tensor& p, int64_t heads, const std::vector<Tensor>& table);

/// Keys or values kv (B, T, H_kv d) with each of their kv_heads heads repeated for the heads /
/// kv_heads query heads it serves: (B, T, heads d), head j r + i = kv head j. Throws ShapeError
/// when kv_heads does not divide kv's last axis or heads.
Tensor repeat_kv(const Tensor& kv, int64_t kv_heads, int64_t heads);

/// A Llama layer's attention in the lesson's terms, from X (B, T, C) and attention_weights'
/// {W_Q, W_K, W_V, W_O}, with S and A formed (causal_attention_weights): per query head,
/// A = softmax(rope(q) rope(k)^T / sqrt(d) + M) with the RoPE of positions 0 .. T - 1 and k, v
/// the key/value head of its group. Q, K, V are per query head, (B, H, T, d) (K and V each key/value
/// head repeated for its group), S and A (B, H, T, T), Y = merged heads times W_O (B, T, C):
/// LlamaAttention::forward's value. Throws ShapeError (weights that do not fit c or X).
AttentionOutput llama_attention(const Tensor& X, const std::vector<Tensor>& W,
                                const LlamaConfig& c);

class LlamaAttention : public Module {
 public:
  LlamaAttention(const LlamaConfig& config, Rng& init_rng);
  /// x (B, T, C) for positions [start, start + T) -> (B, T, C). With caches (both non-null), the
  /// positions before `start` are the cached keys and values, which the rotated keys and the
  /// values of x join ((B, T_cached, H_kv d) each, undefined when empty).
  Tensor forward(const Tensor& x, int64_t start = 0, Tensor* k_cache = nullptr,
                 Tensor* v_cache = nullptr) const;

  Linear q_proj;  // (H d, C)
  Linear k_proj;  // (H_kv d, C)
  Linear v_proj;  // (H_kv d, C)
  Linear o_proj;  // (C, H d)

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double theta_;
};

class LlamaMLP : public Module {
 public:
  LlamaMLP(const LlamaConfig& config, Rng& init_rng);
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  Linear gate_proj;  // (I, C)
  Linear up_proj;    // (I, C)
  Linear down_proj;  // (C, I)
};

class LlamaDecoderLayer : public Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, Rng& init_rng);
  /// x (B, T, C) for positions [start, start + T) -> (B, T, C); caches as LlamaAttention's.
  Tensor forward(const Tensor& x, int64_t start = 0, Tensor* k_cache = nullptr,
                 Tensor* v_cache = nullptr) const;
  /// forward(x) after the forward hooks (a cached call runs none).
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  LlamaAttention self_attn;
  LlamaMLP mlp;
  RMSNorm input_layernorm;
  RMSNorm post_attention_layernorm;
};

class Llama : public Module {
 public:
  /// Draws the initial weights from init_rng (see the top of this file). Throws ValueError for
  /// a size < 1, num_attention_heads not dividing hidden_size, num_key_value_heads not dividing
  /// num_attention_heads, an odd head_dim, rms_norm_eps < 0, rope_theta not > 0, an int64 dtype.
  Llama(const LlamaConfig& config, Rng& init_rng);

  /// idx (B, T) int64 -> logits (B, T, vocab_size). Throws ShapeError (idx not rank 2),
  /// ValueError (T > max_position_embeddings, idx not int64 or outside [0, vocab_size)).
  Tensor forward(const Tensor& idx) const;
  Tensor operator()(const Tensor& idx) const { return hooked({idx}, forward(idx)); }
  /// Mean cross-entropy of forward(idx) against targets (B, T) int64; targets of -1 are
  /// ignored. Throws like forward, and ShapeError when targets' shape is not idx's.
  Tensor loss(const Tensor& idx, const Tensor& targets) const;
  /// Logits (B, T_new, vocab_size) of new positions idx (B, T_new) after the cache's, under
  /// NoGradGuard; the cache keeps each layer's rotated keys and values of the H_kv key/value
  /// heads only, (B, T_cached, H_kv d). Equals the last T_new rows of forward() on the whole
  /// sequence. Throws ValueError when the sequence would pass max_position_embeddings,
  /// ShapeError when idx is not rank 2 or its batch differs from the cache's.
  Tensor forward_cached(const Tensor& idx, KVCache& cache) const;

  /// The input of layer `layer`'s self_attn on idx (B, T): the residual stream after layers
  /// 0 .. layer - 1, through the layer's input_layernorm, (B, T, C). Throws as forward, and
  /// ValueError for a layer outside [0, num_hidden_layers).
  Tensor attention_input(const Tensor& idx, int64_t layer) const;
  /// Layer `layer`'s self_attn as weights acting on the right, x W: W_Q = q_proj^T (C, H d),
  /// W_K = k_proj^T and W_V = v_proj^T (C, H_kv d), W_O = o_proj^T (H d, C). With the RoPE of
  /// the positions, the grouping of repeat_kv and the causal softmax scaled by 1/sqrt(d), they
  /// are the layer's attention on attention_input(idx, layer). Throws ValueError for a layer
  /// outside [0, num_hidden_layers).
  std::vector<Tensor> attention_weights(int64_t layer) const;

  const LlamaConfig& config() const { return config_; }
  /// Turns LlamaConfig::checkpoint_blocks on or off. Never throws.
  void set_checkpoint_blocks(bool on) { config_.checkpoint_blocks = on; }

  // Hugging Face's LlamaModel, `model.` in the names.
  struct Model : Module {
    Model(const LlamaConfig& config, Rng& init_rng);
    Embedding embed_tokens;  // (V, C)
    ModuleList<LlamaDecoderLayer> layers;
    RMSNorm norm;
  };

 private:
  // Throws (naming `who`) unless idx is (B, T) int64 and positions [start, start + T) fit.
  void check_idx(const Tensor& idx, int64_t start, const char* who) const;
  // model.layers[layer]; throws ValueError (naming `who`) for a layer outside the model.
  const LlamaDecoderLayer& decoder_layer(int64_t layer, const char* who) const;
  Tensor run(const Tensor& idx, int64_t start, KVCache* cache, const char* who) const;

  LlamaConfig config_;

 public:
  Model model;                      // after config_, which it is built from
  std::unique_ptr<Linear> lm_head;  // (V, C); null when tie_word_embeddings
};

}  // namespace tg::nn
