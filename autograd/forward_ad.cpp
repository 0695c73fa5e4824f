// Forward mode: the level, dual tensors, and what record() does with tangents (autograd/node.h).

#include <tapegrad/autograd/forward_ad.h>

#include <atomic>
#include <cmath>
#include <exception>
#include <string>

#include <tapegrad/autograd/engine.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/pool.h>

namespace tg {

namespace {
thread_local uint64_t open_level = 0;  // what ops see (0 inside a rule)
thread_local bool level_open = false;  // a DualLevel lives on this thread
std::atomic<uint64_t> next_level{1};   // levels are numbered across threads, never reused

// A new handle to t's values, shape and place on the tape, without t's tangent.
Tensor alias(const Tensor& t) {
  auto p = detail::make_pooled<TensorImpl>();
  p->shape = t.shape();
  p->dtype = t.dtype();
  p->storage = t.impl().storage;
  return Tensor(std::move(p));
}

// Y = X, dX = dY, tY = tX: how a dual and its unpacked primal stay on the tape as X.
Tensor identity(const char* op, const Tensor& X, const Tensor& out) {
  return record(op, out, {X})
      .formula([](const Tensor& dY) -> Grads { return {dY}; })
      .jvp([](const Tangents& t) { return t[0]; });
}

// "anomaly: the tangent rule of 'exp' returned NaN at [1, 2] ..." when anomaly mode is on.
void check_tangent_anomaly(const char* op, const Tensor& t, const std::source_location& where) {
  double value = 0;
  const int64_t bad = detail::first_non_finite(t, value);
  if (bad >= 0)
    throw ValueError(std::string("anomaly: the tangent rule (jvp) of '") + op + "' (called at " +
                     where.file_name() + ":" + std::to_string(where.line()) + ") returned " +
                     detail::non_finite_name(value) + " in the output's tangent (shape " +
                     t.shape().str() + ") at " + t.shape().index_str(bad) + " (tg::AnomalyGuard is on)");
}
}  // namespace

namespace fwad {

DualLevel::DualLevel() {
  if (level_open)
    throw GraphError("fwad::DualLevel: a level is open on this thread already; nested forward "
                     "mode is not supported (close the outer level first)");
  level_open = true;
  open_level = next_level.fetch_add(1, std::memory_order_relaxed);
}

DualLevel::~DualLevel() {
  level_open = false;
  open_level = 0;
}

Tensor make_dual(const Tensor& primal, const Tensor& tangent) {
  if (!level_open)
    throw GraphError("fwad::make_dual: no forward-AD level is open; make duals inside a "
                     "tg::fwad::DualLevel");
  if (open_level == 0)
    throw GraphError("fwad::make_dual: called inside a tangent rule, where forward mode is off");
  if (!primal.defined() || !tangent.defined())
    throw ValueError("fwad::make_dual: the primal and the tangent must be defined tensors");
  if (!is_floating(primal.dtype()) || tangent.dtype() != primal.dtype())
    throw ValueError(std::string("fwad::make_dual: the tangent is ") + dtype_name(tangent.dtype()) +
                     " and the primal " + dtype_name(primal.dtype()) +
                     "; both must be the same float dtype");
  if (tangent.shape() != primal.shape())
    throw ShapeError("fwad::make_dual: the tangent's shape " + tangent.shape().str() +
                     " differs from the primal's " + primal.shape().str());
  Tensor dual = identity("make_dual", primal, alias(primal));  // primal carries no tangent itself
  TensorImpl& d = dual.impl();
  d.tangent = tangent.impl_ptr();
  d.tangent_level = open_level;
  return dual;
}

UnpackedDual unpack_dual(const Tensor& dual) {
  Tensor tangent = detail::tangent_of(dual);
  if (!tangent.defined()) return {dual, Tensor()};
  const detail::NoForwardGuard plain;  // the primal carries no tangent
  return {identity("unpack_dual", dual, alias(dual)), tangent};
}

}  // namespace fwad

namespace detail {

uint64_t forward_level() { return open_level; }

NoForwardGuard::NoForwardGuard() : outer_(std::exchange(open_level, 0)) {}
NoForwardGuard::~NoForwardGuard() { open_level = outer_; }

Tensor tangent_of(const Tensor& t) {
  if (open_level == 0 || !t.defined()) return Tensor();
  const TensorImpl& i = t.impl();
  if (!i.tangent || i.tangent_level != open_level) return Tensor();
  return Tensor(i.tangent);
}

std::unique_ptr<Tangents> gather_tangents(const InputRefs& inputs) {
  std::unique_ptr<Tangents> t;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor ti = tangent_of(inputs[i]);
    if (!ti.defined()) continue;
    if (i >= static_cast<std::size_t>(kMaxInputs))
      throw GraphError("forward AD: an op of " + std::to_string(inputs.size()) + " inputs; a "
                       "tangent rule takes at most " + std::to_string(kMaxInputs));
    if (!t) t = std::make_unique<Tangents>();
    (*t)[i] = std::move(ti);
  }
  return t;
}

void set_output_tangent(Tensor& out, Node* node, const char* op, const Tensor& t,
                        const std::source_location& where) {
  if (!t.defined()) return;  // a zero tangent
  if (t.shape() != out.shape() || t.dtype() != out.dtype())
    throw GraphError(std::string("forward AD: the tangent rule (jvp) of '") + op + "' returned " +
                     dtype_name(t.dtype()) + " " + t.shape().str() + " for an output of " +
                     dtype_name(out.dtype()) + " " + out.shape().str());
  if (is_anomaly_enabled()) check_tangent_anomaly(op, t, where);
  // An op may hand back a tensor another handle holds (a reshape to the same shape returns its
  // input): the tangent goes on a handle of its own, so the other's stays as it was.
  if (out.impl_ptr().use_count() > 1) {
    Tensor own = alias(out);
    own.impl().requires_grad = out.requires_grad() && !out.is_leaf();
    own.impl().grad_fn = out.impl().grad_fn;
    out = std::move(own);
  }
  out.impl().tangent = t.impl_ptr();
  out.impl().tangent_level = open_level;
  if (node) {
    // The values only: t may be on the tape through a node that reads the output (a rule
    // (t, Y) under grad mode), which holds this node; a handle to t itself would be a cycle.
    Node::Extras& x = node->extras();
    x.output_tangent = t.detach().impl_ptr();
    x.output_tangent_level = open_level;
  }
}

Tensor output_for_rule(const Tensor& out) {
  if (out.is_leaf()) return alias(out);
  return node_output(out.impl().grad_fn, out.impl().storage);
}

[[noreturn]] void rethrow_in_tangent_rule(const char* op) {
  const std::string in = std::string(" (in the tangent rule (jvp) of '") + op + "')";
  try {
    throw;
  } catch (const ShapeError& e) {
    throw ShapeError(e.what() + in);
  } catch (const ValueError& e) {
    throw ValueError(e.what() + in);
  } catch (const GraphError& e) {
    throw GraphError(e.what() + in);
  } catch (const IoError& e) {
    throw IoError(e.what() + in);
  }
}

[[noreturn]] void throw_no_tangent_rule(const char* op) {
  throw GraphError(std::string("forward AD: '") + op +
                   "' has no tangent rule (jvp), so forward mode cannot go through it; record it "
                   "with .jvp(...) (autograd/node.h), or differentiate this function in reverse mode");
}

}  // namespace detail

}  // namespace tg
