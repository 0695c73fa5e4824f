#pragma once
// A user's own autograd/tensor.h; if a tapegrad header included this one, tg::Tensor would be
// missing and the build would stop here.
#define USER_AUTOGRAD_TENSOR_H 1
namespace user {
struct Tensor {
  double value = 0.5;
};
}  // namespace user
