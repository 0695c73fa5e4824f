// GradReadyScope: this thread's living scopes in a list, the newest in charge; the backward pass
// asks for its callback (detail::grad_ready_callback).

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/grad_ready.h>

namespace tg {

namespace {
thread_local GradReadyScope* newest_scope = nullptr;      // this thread's living scopes' newest
thread_local const GradReadyFn* ready_callback = nullptr;  // its callback
}  // namespace

const GradReadyFn* detail::grad_ready_callback() { return ready_callback; }

GradReadyScope::GradReadyScope(GradReadyFn on_ready)
    : fn_(std::move(on_ready)), older_(newest_scope) {
  if (older_) older_->newer_ = this;
  newest_scope = this;
  ready_callback = fn_ ? &fn_ : nullptr;
}

GradReadyScope::~GradReadyScope() {
  if (older_) older_->newer_ = newer_;
  if (newer_) {
    newer_->older_ = older_;
    return;  // a newer scope is still in charge
  }
  newest_scope = older_;
  ready_callback = older_ && older_->fn_ ? &older_->fn_ : nullptr;
}

}  // namespace tg
