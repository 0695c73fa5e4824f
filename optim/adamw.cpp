#include <tapegrad/optim/adamw.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include <tapegrad/ops/threads.h>

namespace tg::optim {

namespace {
constexpr double kNoBound = std::numeric_limits<double>::infinity();
}  // namespace

AdamW::AdamW(NamedTensors params, const AdamWOptions& options)
    : Optimizer("AdamW", std::move(params), options.lr, {"m", "v"}), options_(options) {
  check_range("beta1", options.beta1, 0, 1);
  check_range("beta2", options.beta2, 0, 1);
  check_range("eps", options.eps, 0, kNoBound);
  check_range("weight_decay", options.weight_decay, 0, kNoBound);
  check_range("decay_rank_min", options.decay_rank_min, 0, kNoBound);
}

AdamW::AdamW(NamedTensors params, double lr, std::pair<double, double> betas, double eps,
             double weight_decay, int decay_rank_min)
    : AdamW(std::move(params),
            AdamWOptions{lr, betas.first, betas.second, eps, weight_decay, decay_rank_min}) {}

// torch's _single_tensor_adamw line by line; its scalars are doubles, cast to the parameter's
// dtype where they meet a tensor, and addcdiv_ computes p + (value * m) / denom.
void AdamW::update(Tensor& param, const Tensor& grad, std::vector<Tensor>& buffers,
                   int64_t t) {
  const AdamWOptions& o = options_;
  const double lr = this->lr();
  const double weight_decay = param.rank() >= o.decay_rank_min ? o.weight_decay : 0.0;
  const double bias_correction1 = 1 - std::pow(o.beta1, static_cast<double>(t));
  const double bias_correction2 = 1 - std::pow(o.beta2, static_cast<double>(t));
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  dispatch(param.dtype(), [&]<class T>() {
    const int64_t n = param.numel();
    const T decay = static_cast<T>(1 - lr * weight_decay);
    const T beta1 = static_cast<T>(o.beta1), one_minus_beta1 = static_cast<T>(1 - o.beta1);
    const T beta2 = static_cast<T>(o.beta2), one_minus_beta2 = static_cast<T>(1 - o.beta2);
    const T bc2_sqrt = static_cast<T>(bias_correction2_sqrt), eps = static_cast<T>(o.eps);
    const T neg_step_size = static_cast<T>(-step_size);
    const T* g = grad.data<T>();
    T* p = param.data<T>();
    T* m = buffers[0].data<T>();
    T* v = buffers[1].data<T>();
    // Vectorised, square roots included: optim/sources.cmake compiles this file with
    // -fno-math-errno (v is never negative, so std::sqrt never sets errno here), and the
    // square roots stay exact (vsqrtps / vsqrtpd), as torch's. Each entry on its own, so a
    // large parameter's parts go to the threads.
    detail::for_parts(n, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        p[i] = p[i] * decay;                                  // p *= 1 - lr wd
        m[i] = m[i] * beta1 + one_minus_beta1 * g[i];         // m = b1 m + (1 - b1) g
        v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];  // v = b2 v + (1 - b2) g^2
        const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;     // sqrt(v_hat) + eps
        p[i] = p[i] + neg_step_size * m[i] / denom;           // p -= lr m_hat / denom
      }
    }, detail::kPassParallelFrom);
  });
}

}  // namespace tg::optim
