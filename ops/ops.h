#pragma once
// Every op. Each file pair in this folder holds one op: its math, shape checks, forward and
// backward.

#include "ops/add.h"
#include "ops/add_mask.h"
#include "ops/broadcast_to.h"
#include "ops/causal_attention.h"
#include "ops/matmul.h"
#include "ops/mul.h"
#include "ops/permute.h"
#include "ops/reshape.h"
#include "ops/rope.h"
#include "ops/scale.h"
#include "ops/softmax.h"
#include "ops/sub.h"
#include "ops/sum.h"
#include "ops/sum_of_squares.h"
#include "ops/sum_to.h"
#include "ops/transpose.h"
