#include <tapegrad/autograd/grad_mode.h>

namespace tg {

namespace {
thread_local bool grad_enabled = true;
}

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool on) { grad_enabled = on; }

}  // namespace tg
