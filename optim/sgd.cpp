#include <tapegrad/optim/sgd.h>

#include <limits>
#include <utility>

namespace tg::optim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string> sgd_kinds(double momentum) {
  if (momentum != 0) return {"momentum"};
  return {};
}

}  // namespace

SGD::SGD(NamedTensors params, double lr, double momentum, double weight_decay,
         int decay_rank_min)
    : SGD(std::move(params), SgdOptions{lr, momentum, weight_decay, decay_rank_min}) {}

SGD::SGD(NamedTensors params, const SgdOptions& options)
    : Optimizer("SGD", std::move(params), options.lr, sgd_kinds(options.momentum)),
      options_(options) {
  check_range("momentum", options.momentum, 0, kInf);
  check_range("weight_decay", options.weight_decay, 0, kInf);
  check_range("decay_rank_min", options.decay_rank_min, 0, kInf);
}

void SGD::update(Tensor& param, const Tensor& grad, std::vector<Tensor>& buffers,
                 int64_t t) {
  const bool decays = param.rank() >= options_.decay_rank_min && options_.weight_decay != 0;
  const double momentum = options_.momentum;
  dispatch(param.dtype(), [&]<class T>() {
    const int64_t n = param.numel();
    const T lr = static_cast<T>(this->lr()), wd = static_cast<T>(options_.weight_decay);
    const T* dp = grad.data<T>();
    T* p = param.data<T>();
    T* buf = momentum != 0 ? buffers[0].data<T>() : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const T g = decays ? dp[i] + wd * p[i] : dp[i];  // g = grad + wd p
      T step = g;
      if (buf) {
        buf[i] = t == 1 ? g : static_cast<T>(momentum) * buf[i] + g;  // buf = momentum buf + g
        step = buf[i];
      }
      p[i] = p[i] + (-lr) * step;  // p -= lr buf
    }
  });
}

}  // namespace tg::optim
