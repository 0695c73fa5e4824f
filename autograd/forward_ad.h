#pragma once
// Forward-mode automatic differentiation, as torch.autograd.forward_ad. Inside a DualLevel, a
// tensor may carry a tangent t beside its value x (a dual tensor, x + t eps with eps^2 = 0);
// every op that reads a dual input runs its tangent rule right after its forward, so its output
// carries J t: one pass, no backward.
//
//   tg::fwad::DualLevel level;
//   Tensor x = tg::fwad::make_dual(x0, t);       // x0 + t eps
//   Tensor y = f(x);                             // every op's rule runs on the way
//   Tensor Jt = tg::fwad::unpack_dual(y).tangent;  // undefined: y does not depend on x
//
// A tangent rule is the derivative contract's third part (autograd/node.h: `.jvp(...)`), written
// in tg ops like the formula: so it records onto the tape when grad mode is on and the primals
// require grad (reverse over forward), and a backward run inside a level computes with the ops'
// formulas, whose ops carry tangents too (forward over reverse: the Hessian times t).
//
// Tangents belong to their level: one level at a time on a thread, and a tangent made in an
// earlier level is not seen in a later one (it is dropped with its tensor). An op that meets a
// dual input and has no tangent rule throws GraphError naming it.

#include <cstdint>

#include <tapegrad/autograd/tensor.h>

namespace tg::fwad {

/// Opens a forward-AD level on this thread for its scope (torch.autograd.forward_ad.dual_level).
/// Throws GraphError when one is open already (nested forward mode is not supported, as in
/// PyTorch).
class DualLevel {
 public:
  DualLevel();
  ~DualLevel();
  DualLevel(const DualLevel&) = delete;
  DualLevel& operator=(const DualLevel&) = delete;
};

/// A dual tensor: primal's values (shared, not copied) with `tangent`, of the same shape and
/// dtype, as its tangent. On the tape as primal (gradients flow back to it). Throws GraphError
/// outside a DualLevel, ShapeError / ValueError when the tangent's shape or dtype differs from
/// the primal's or they are not float.
Tensor make_dual(const Tensor& primal, const Tensor& tangent);

struct UnpackedDual {
  Tensor primal;   // the values, without the tangent (on the tape as the dual)
  Tensor tangent;  // undefined when the tensor carries none at this level (a zero tangent)
};
/// The values and the tangent of a tensor (torch.autograd.forward_ad.unpack_dual).
UnpackedDual unpack_dual(const Tensor& dual);

}  // namespace tg::fwad

namespace tg::detail {

/// The id of the forward-AD level open on this thread, or 0.
uint64_t forward_level();
/// While alive, ops run no tangent rules on this thread: a rule's own ops see its inputs'
/// tangents as absent (they compute the output's tangent; they have none themselves).
class NoForwardGuard {
 public:
  NoForwardGuard();
  ~NoForwardGuard();
  NoForwardGuard(const NoForwardGuard&) = delete;
  NoForwardGuard& operator=(const NoForwardGuard&) = delete;

 private:
  uint64_t outer_;
};
/// t's tangent at the open level, or an undefined tensor.
Tensor tangent_of(const Tensor& t);

}  // namespace tg::detail
