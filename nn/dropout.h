#pragma once
// Dropout, as torch.nn.Dropout(p): active only while the module is training. It draws from an
// Rng it does not own (a model keeps one for all its dropout layers).

#include <string>

#include <tapegrad/nn/layer.h>
#include <tapegrad/ops/dropout.h>

namespace tg::nn {

class Dropout : public Layer {
 public:
  /// Throws ValueError for p outside [0, 1).
  Dropout(double p_, Rng& rng) : p(p_), rng_(rng) {
    if (!(p >= 0.0 && p < 1.0))
      throw ValueError("Dropout: p = " + std::to_string(p) + " is outside [0, 1)");
  }
  /// x itself in eval mode or with p = 0; else x with elements zeroed and the rest scaled.
  Tensor forward(const Tensor& x) const override {
    return p > 0.0 && is_training() ? dropout(x, p, true, rng_) : x;
  }

  double p;

 private:
  Rng& rng_;
};

}  // namespace tg::nn
