#pragma once
// GPT, nanoGPT's model.py in tapegrad: token + position embeddings, n_layer pre-LN blocks
//   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
// a final ln_f, and logits from the token embedding itself (lm_head tied to wte). Parameter
// names are nanoGPT's state_dict names (`transformer.h.0.attn.c_attn.weight`, ...).
//
// Init as nanoGPT, drawn from the Rng given to GPT's constructor in named_parameters() order
// (each weight drawn whole, row-major; LayerNorm weights and biases draw nothing): weights
// N(0, 0.02), both c_proj weights N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm 1 and 0.
//
// Dropout (after the embeddings, after each c_proj) draws from an Rng the model owns
// (set_seed). nanoGPT's dropout on the attention weights is not applied: the fused attention
// op never forms them.

#include <cstdint>
#include <memory>
#include <vector>

#include <tapegrad/nn/dropout.h>
#include <tapegrad/nn/embedding.h>
#include <tapegrad/nn/layer_norm.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/module.h>

namespace tg::nn {

/// How the MLP's gelu computes Phi: the tanh approximation (GPT-2's) or exactly with erf.
enum class GeluKind { tanh, erf };

struct GPTConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  bool bias = true;
  GeluKind gelu = GeluKind::tanh;
  bool attention_only = false;  // blocks without ln_2 and mlp
  double dropout = 0.0;
  Dtype dtype = get_default_dtype();  // when the config is made
  // Each block under tg::checkpoint: its activations recomputed in the backward, not kept (less
  // memory, one more forward of the blocks). How a run trains, not what the model is: not in
  // tapegrad.config.
  bool checkpoint_blocks = false;
};

/// Keys and values of the positions seen so far, per layer, for generation (GPT::forward_cached).
struct KVCache {
  std::vector<Tensor> k, v;  // per layer, (B, T_cached, C)
  /// The number of positions cached.
  int64_t length() const { return k.empty() || !k[0].defined() ? 0 : k[0].size(1); }
  void clear() {
    k.clear();
    v.clear();
  }
};

class CausalSelfAttention : public Module {
 public:
  /// Throws ValueError when n_head does not divide n_embd.
  CausalSelfAttention(const GPTConfig& config, Rng& init_rng, Rng& dropout_rng);
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x) const;
  /// The new positions x (B, T_new, C), attending to the cached ones and themselves (the fused
  /// causal_attention_heads, its mask shifted by the T_cached positions); appends their keys and
  /// values to k_cache and v_cache ((B, T_cached, C), undefined when empty).
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  Linear c_attn;  // (3C, C): q, k, v side by side
  Linear c_proj;  // (C, C)
  Dropout resid_dropout;

 private:
  int64_t n_head_, n_embd_;
};

class MLP : public Module {
 public:
  MLP(const GPTConfig& config, Rng& init_rng, Rng& dropout_rng);
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  Linear c_fc;    // (4C, C)
  Linear c_proj;  // (C, 4C)
  Dropout dropout;

 private:
  GeluKind gelu_;
};

class Block : public Module {
 public:
  Block(const GPTConfig& config, Rng& init_rng, Rng& dropout_rng);
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x) const;
  /// forward for new positions with the layer's cache (see CausalSelfAttention).
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache) const;
  Tensor operator()(const Tensor& x) const { return hooked({x}, forward(x)); }

  LayerNorm ln_1;
  CausalSelfAttention attn;
  std::unique_ptr<LayerNorm> ln_2;  // null when attention_only
  std::unique_ptr<MLP> mlp;         // null when attention_only
};

class GPT : public Module {
 public:
  /// Draws the initial weights from init_rng (see the top of this file). Throws ValueError for
  /// a size < 1, n_head not dividing n_embd, dropout outside [0, 1) or an int64 dtype.
  GPT(const GPTConfig& config, Rng& init_rng);

  /// idx (B, T) int64 -> logits (B, T, vocab_size). Throws ShapeError (idx not rank 2),
  /// ValueError (T > block_size, idx not int64 or outside [0, vocab_size)).
  Tensor forward(const Tensor& idx) const;
  Tensor operator()(const Tensor& idx) const { return hooked({idx}, forward(idx)); }
  /// Mean cross-entropy of forward(idx) against targets (B, T) int64; targets of -1 are
  /// ignored. Throws like forward, and ShapeError when targets' shape is not idx's.
  Tensor loss(const Tensor& idx, const Tensor& targets) const;
  /// Logits (B, T_new, vocab_size) of new positions idx (B, T_new) that follow the cache's,
  /// computed under NoGradGuard from the cached keys and values (each new token costs O(T));
  /// appends the new keys and values. Equals the last T_new rows of forward() on the whole
  /// sequence. Throws ValueError when the sequence would pass block_size, ShapeError when idx
  /// is not rank 2 or its batch differs from the cache's.
  Tensor forward_cached(const Tensor& idx, KVCache& cache) const;

  /// The input of block `layer`'s attention for idx: ln_1 of the residual stream, (B, T, C).
  /// Throws like forward, ValueError for a layer outside [0, n_layer).
  Tensor attention_input(const Tensor& idx, int64_t layer) const;
  /// Block `layer`'s attention as the lesson's weights, for nn/attention.h's
  /// multi_head_attention (heads = n_head, need_weights to see A): W_Q, W_K, W_V (C, C) cut from
  /// c_attn and W_O = c_proj^T. With them, multi_head_attention(attention_input(idx, layer), ...)
  /// is the block's attention, so the weights A can be shown and the invariant checker run on
  /// a trained model. Throws ValueError for a model with biases (the lesson's layer has none)
  /// or a layer outside [0, n_layer).
  std::vector<Tensor> attention_weights(int64_t layer) const;

  const GPTConfig& config() const { return config_; }
  /// Reseeds the Rng the dropout layers draw from. Never throws.
  void set_seed(uint64_t seed) { dropout_rng_ = Rng(seed); }
  /// Turns GPTConfig::checkpoint_blocks on or off. Never throws.
  void set_checkpoint_blocks(bool on) { config_.checkpoint_blocks = on; }
  /// The dropout layers' Rng (for saving and restoring a run's state).
  Rng& dropout_rng() { return dropout_rng_; }

  // nanoGPT's `transformer` ModuleDict.
  struct Transformer : Module {
    Transformer(const GPTConfig& config, Rng& init_rng, Rng& dropout_rng);
    Embedding wte;  // (V, C), also the output head
    Embedding wpe;  // (block_size, C)
    Dropout drop;
    ModuleList<Block> h;
    LayerNorm ln_f;
  };

 private:
  // Embeddings of positions [start, start + T), after dropout.
  Tensor embed(const Tensor& idx, int64_t start, const char* who) const;
  // ln_f and the tied head: (B, T, C) -> (B, T, V).
  Tensor logits(const Tensor& x) const;

  GPTConfig config_;
  mutable Rng dropout_rng_{0};  // the forward's dropouts draw from it (the blocks hold it)

 public:
  Transformer transformer;  // after config_ and dropout_rng_, which it is built from
};

}  // namespace tg::nn
