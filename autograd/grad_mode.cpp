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

}  // namespace tg
