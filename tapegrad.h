#pragma once
// tapegrad: reverse-mode automatic differentiation on Eigen. This header only includes the real
// ones; include it, or just the pieces you use.

#include "autograd/error.h"
#include "autograd/grad_mode.h"
#include "check/gradcheck.h"
#include "autograd/node.h"
#include "autograd/storage.h"
#include "autograd/tensor.h"
#include "ops/ops.h"
#include "nn/attention.h"
#include "check/checker.h"
#include "io/npy.h"
