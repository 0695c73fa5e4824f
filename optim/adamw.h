#pragma once
// AdamW as torch.optim.AdamW (amsgrad off), per parameter p with gradient g at step t = 1, 2, ...
//   p *= 1 - lr wd                                    decoupled weight decay
//   m = b1 m + (1 - b1) g                             first moment
//   v = b2 v + (1 - b2) g^2                           second moment
//   p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// in the parameter's dtype, in the order of torch's _single_tensor_adamw, so float32 agrees with
// torch to rounding. Weight decay applies to parameters of rank >= decay_rank_min only (2 by
// default: nanoGPT's two parameter groups, matrices and embeddings decay, biases and LayerNorm
// gains do not); decay_rank_min 0 decays every parameter, as torch with one group.
// State: "optim.step", "optim.m.NAME" (exp_avg) and "optim.v.NAME" (exp_avg_sq).

#include <utility>

#include <tapegrad/optim/optimizer.h>

namespace tg::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  int decay_rank_min = 2;  // weight decay only for parameters of at least this rank
};

class AdamW : public Optimizer {
 public:
  /// Throws ValueError when lr, eps or weight_decay is negative or not finite, a beta is outside
  /// [0, 1), decay_rank_min < 0, or for a bad parameter list (see Optimizer).
  explicit AdamW(NamedTensors params, const AdamWOptions& options = {});
  /// torch's argument order; throws as above.
  AdamW(NamedTensors params, double lr, std::pair<double, double> betas = {0.9, 0.999},
        double eps = 1e-8, double weight_decay = 1e-2, int decay_rank_min = 2);

  /// The options as constructed (lr() is the current rate, set_lr moves it).
  const AdamWOptions& options() const { return options_; }

 protected:
  void update(Tensor& param, const Tensor& g, std::vector<Tensor>& buffers, int64_t t) override;

 private:
  AdamWOptions options_;
};

}  // namespace tg::optim
