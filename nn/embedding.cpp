#include <tapegrad/nn/embedding.h>

#include <string>

#include <tapegrad/ops/embedding.h>

namespace tg::nn {

Embedding::Embedding(int64_t V, int64_t C, Rng& rng, Dtype dtype, double init_std)
    : num_embeddings(V), embedding_dim(C) {
  if (V < 1 || C < 1 || !is_floating(dtype))
    throw ValueError("Embedding(" + std::to_string(V) + ", " + std::to_string(C) +
                     "): sizes must be >= 1 and the dtype float32 or float64");
  weight = randn({V, C}, rng, dtype, init_std);
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& idx) const { return embedding(idx, weight); }

}  // namespace tg::nn
