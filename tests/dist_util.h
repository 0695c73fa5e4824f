#pragma once
// The data-parallel problem shared by dist_test (threads as ranks) and dist_mpi_test (MPI
// ranks): a small regression net, a fixed global batch, and the mean squared error over a slice
// of its rows: with equal slices, the mean over ranks of the slices' gradients is the gradient
// of the whole batch's mean squared error.

#include <cstdint>

#include <tapegrad/nn/linear.h>
#include <tapegrad/nn/module.h>
#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/ops.h>

namespace tg::dist_test {

constexpr int64_t kB = 12, kD = 3, kE = 2;  // global batch rows, input and output features

// Linear(D, E) with bias, plus a parameter the loss never touches (it never has a gradient).
class Net : public nn::Module {
 public:
  explicit Net(uint64_t seed) : rng_(seed), fc(kD, kE, true, rng_, Dtype::f64, 0.5) {
    register_module("fc", fc);
    unused = randn({2}, rng_);
    register_parameter("unused", unused);
  }
  Rng rng_;
  nn::Linear fc;
  Tensor unused;
};

struct Batch {
  Tensor X, Y;  // (B, D), (B, E)
};

inline Batch make_batch(uint64_t seed) {
  Rng rng(seed);
  Batch b{randn({kB, kD}, rng), randn({kB, kE}, rng)};
  return b;
}

// mean over rows [begin, begin + rows) and outputs of (fc(x) - y)^2.
inline Tensor slice_loss(const Net& net, const Batch& batch, int64_t begin, int64_t rows) {
  Tensor x = narrow(batch.X, 0, begin, rows);            // (rows, D)
  Tensor y = narrow(batch.Y, 0, begin, rows);            // (rows, E)
  Tensor d = sub(net.fc.forward(x), y);                  // (rows, E)
  return scale(sum_of_squares(d), 1.0 / static_cast<double>(rows * kE));      // ()
}

}  // namespace tg::dist_test
