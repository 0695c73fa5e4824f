#include <tapegrad/nn/flatten.h>

#include <string>

#include <tapegrad/ops/squeeze.h>

namespace tg::nn {

Tensor Flatten::forward(const Tensor& x) const {
  try {
    return flatten(x, static_cast<int>(start_dim), static_cast<int>(end_dim));  // torch.flatten's
  } catch (const ShapeError& e) {
    throw ShapeError("Flatten(" + std::to_string(start_dim) + ", " + std::to_string(end_dim) +
                     "): " + e.what());
  }
}

}  // namespace tg::nn
