// The thread-local modes: grad mode, and anomaly mode with the check it runs after each
// derivative.

#include <cmath>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/grad_mode.h>

namespace tg {

namespace {
thread_local bool grad_enabled = true;
thread_local bool anomaly_enabled = false;
}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool on) { grad_enabled = on; }

bool is_anomaly_enabled() { return anomaly_enabled; }
AnomalyGuard::AnomalyGuard() : prev_(anomaly_enabled) { anomaly_enabled = true; }
AnomalyGuard::~AnomalyGuard() { anomaly_enabled = prev_; }

namespace detail {

int64_t first_non_finite(const Tensor& t, double& value) {
  int64_t bad = -1;
  dispatch(t.dtype(), [&]<class T>() {
    const T* p = t.data<T>();
    for (int64_t k = 0; k < t.numel() && bad < 0; ++k)
      if (!std::isfinite(p[k])) bad = k, value = p[k];
  });
  return bad;
}

const char* non_finite_name(double value) { return std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf"; }

void check_anomaly(const Node& n, const Grads& grads) {
  for (int i = 0; i < n.num_inputs; ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    double value = 0;
    const int64_t bad = first_non_finite(g, value);
    if (bad >= 0)
      throw ValueError("anomaly: the backward of " + op_at(n) + " returned " + non_finite_name(value) +
                       " in the gradient of input " + std::to_string(i) + " (shape " +
                       g.shape().str() + ") at " + g.shape().index_str(bad) +
                       " (tg::AnomalyGuard is on)");
  }
}

}  // namespace detail

}  // namespace tg
