#pragma once
// Grad mode: whether ops record onto the tape. Thread-local, so threads do not disturb each other.

namespace tg {

bool is_grad_enabled();
void set_grad_enabled(bool on);

/// Turns recording off for its scope (restores the previous mode on exit).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Anomaly mode, as torch.autograd.detect_anomaly: while an AnomalyGuard lives on this thread,
/// a backward whose derivative produces a NaN or an infinity throws ValueError naming the op,
/// the user's line that recorded it and the first bad entry. Off, it costs one flag test per node.
bool is_anomaly_enabled();
class AnomalyGuard {
 public:
  AnomalyGuard();
  ~AnomalyGuard();
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool prev_;
};

/// Sets grad mode to `on` for its scope; the backward pass uses it for create_graph.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(is_grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tg
