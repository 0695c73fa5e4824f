#pragma once
// A batch of next-token examples: x holds B windows of T tokens, y the same windows shifted by
// one, so y[b, t] is the token that follows x[b, t]. Both int64 (B, T).

#include "autograd/tensor.h"

namespace tg::data {

struct Batch {
  Tensor x;  // (B, T) int64
  Tensor y;  // (B, T) int64
};

}  // namespace tg::data
