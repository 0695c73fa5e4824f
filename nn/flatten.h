#pragma once
// Flatten, as torch.nn.Flatten(start_dim = 1, end_dim = -1): axes start .. end (negative ones
// count from the end) merged into one, e.g. (N, C, H, W) -> (N, C H W). A reshape: the same
// elements, storage shared.

#include <cstdint>

#include <tapegrad/nn/layer.h>

namespace tg::nn {

class Flatten : public Layer {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  /// Throws ShapeError when start or end is not an axis of x or start comes after end.
  Tensor forward(const Tensor& x) const override;

  int64_t start_dim, end_dim;
};

}  // namespace tg::nn
