// A user project whose own headers have tapegrad's room names (nn/linear.h, ops/ops.h,
// autograd/tensor.h) on the include path ahead of tapegrad's: both sets are used side by side.
#include <iostream>

#include "autograd/tensor.h"
#include "nn/linear.h"
#include "ops/ops.h"
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/ops.h>

int main() {
  user::Linear mine;
  user::Tensor half;
  tg::Rng rng(0);
  tg::nn::Linear layer(4, mine.width, /*bias=*/true, rng);
  tg::Tensor y = tg::sum(layer.forward(tg::ones({2, 4}, layer.weight.dtype())));
  std::cout << "user width " << mine.width << ", twice " << user::twice(mine.width) << ", "
            << half.value << "; tapegrad sum " << y.item() << "\n";
  return layer.weight.shape()[0] == mine.width && user::twice(2) == 4 ? 0 : 1;
}
