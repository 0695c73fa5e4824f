#pragma once
// SGD as torch.optim.SGD (dampening 0, nesterov off), per parameter p with gradient grad:
//   g = grad + wd p
//   buf = g on the first step, else momentum buf + g      (only when momentum != 0)
//   p -= lr buf                                           (p -= lr g without momentum)
// Weight decay applies to parameters of rank >= decay_rank_min only (2 by default: matrices
// decay, biases and LayerNorm gains do not, as nanoGPT's two parameter groups); decay_rank_min 0
// decays every parameter, as torch with one group. Computed in the parameter's dtype.
// State: "optim.step" and, with momentum, "optim.momentum.NAME".

#include <tapegrad/optim/optimizer.h>

namespace tg::optim {

struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0;
  double weight_decay = 0;
  int decay_rank_min = 2;  // weight decay only for parameters of at least this rank
};

class SGD : public Optimizer {
 public:
  /// Throws ValueError when lr, momentum or weight_decay is negative or not finite, when
  /// decay_rank_min < 0, or for a bad parameter list (see Optimizer).
  SGD(NamedTensors params, double lr, double momentum = 0, double weight_decay = 0,
      int decay_rank_min = 2);
  /// The same from options; throws as above.
  SGD(NamedTensors params, const SgdOptions& options);

  /// The options as constructed (lr() is the current rate, set_lr moves it).
  const SgdOptions& options() const { return options_; }

 protected:
  void update(Tensor& param, const Tensor& g, std::vector<Tensor>& buffers, int64_t t) override;

 private:
  SgdOptions options_;
};

}  // namespace tg::optim
