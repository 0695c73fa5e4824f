#pragma once
// Embedding, as torch.nn.Embedding(V, C): row idx of a (V, C) table for each int64 index.

#include <cstdint>

#include <tapegrad/nn/module.h>

namespace tg::nn {

class Embedding : public Module {
 public:
  /// weight drawn from N(0, init_std^2) (nanoGPT's 0.02 by default). Throws ValueError for a
  /// size < 1 or an int64 dtype.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Rng& rng,
            Dtype dtype = get_default_dtype(), double init_std = 0.02);

  /// int64 indices of any shape (rank <= 3) -> their shape plus C. Throws ValueError (indices not
  /// int64 or outside [0, V)), ShapeError (rank).
  Tensor forward(const Tensor& idx) const;
  Tensor operator()(const Tensor& idx) const { return hooked({idx}, forward(idx)); }

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // (V, C)
};

}  // namespace tg::nn
