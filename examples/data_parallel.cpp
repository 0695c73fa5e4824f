// Data-parallel training with tg::dist: every rank holds the whole model, draws the same global
// batch, trains on its own slice of rows, and averages gradients before the optimizer step, so
// the replicas stay equal and follow the one-process run.
//
//   mpirun -np 2 ./data_parallel        (or ./data_parallel alone: one rank)
//
// The model learns y = sin(x0) + x1 x2 with a 3-16-1 tanh MLP, float64, SGD with momentum.
// Exits 1 when the loss did not fall or the replicas drifted apart, 2 when the batch does not
// split evenly over the ranks.

#include <cmath>
#include <cstdio>
#include <iostream>

#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/data_parallel.h>
#include <tapegrad/dist/reducer.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/optim/clip_grad.h>
#include <tapegrad/optim/sgd.h>

namespace {

constexpr int64_t kB = 32, kD = 3, kHidden = 16;  // global batch rows, inputs, hidden units
constexpr int kSteps = 200;

struct Mlp : tg::nn::Module {
  explicit Mlp(tg::Rng& rng)
      : fc1(kD, kHidden, true, rng, tg::Dtype::f64, 0.5), fc2(kHidden, 1, true, rng, tg::Dtype::f64, 0.5) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  tg::Tensor forward(const tg::Tensor& x) const { return fc2(tg::tanh(fc1(x))); }  // (rows, 1)
  tg::nn::Linear fc1, fc2;
};

// The global batch of a step: the same numbers on every rank (one generator, one seed).
void draw_batch(tg::Rng& rng, tg::Tensor& X, tg::Tensor& Y) {
  X = tg::uniform({kB, kD}, rng, -2.0, 2.0, tg::Dtype::f64);  // (B, D)
  Y = tg::Tensor({kB, 1}, tg::Dtype::f64);    // (B, 1)
  double* y = Y.data<double>();
  for (int64_t i = 0; i < kB; ++i)
    y[i] = std::sin(X.at({i, 0})) + X.at({i, 1}) * X.at({i, 2});
}

// max |p - rank 0's p| over every parameter: 0 while the replicas are in step.
double drift_from_rank0(const Mlp& model, tg::dist::Communicator& comm) {
  double drift = 0;
  for (const tg::Tensor& p : model.parameters()) {
    tg::Tensor theirs = p.clone();
    comm.broadcast(theirs, 0);
    const std::vector<double> a = p.to_vector(), b = theirs.to_vector();
    for (size_t i = 0; i < a.size(); ++i) drift = std::max(drift, std::abs(a[i] - b[i]));
  }
  comm.allreduce_sum(&drift, 1);
  return drift;
}

}  // namespace

int main(int argc, char** argv) {
  auto comm = tg::dist::make_communicator(&argc, &argv);  // MPI under mpirun, else one rank
  const int rank = comm->rank(), ranks = comm->size();
  const bool lead = rank == 0;  // rank 0 alone prints
  if (kB % ranks != 0) {
    if (lead) std::cerr << "data_parallel: batch " << kB << " does not split over " << ranks << " ranks\n";
    return 2;
  }
  const int64_t rows = kB / ranks, first = rank * rows;  // this rank's slice of every batch

  tg::Rng init(1000 + rank);  // deliberately different per rank: the broadcast fixes that
  Mlp model(init);
  tg::dist::broadcast_parameters(model, *comm);
  tg::optim::SGD opt(model.named_parameters(), /*lr=*/0.05, /*momentum=*/0.9);
  // Averages the gradients while backward runs (a bucket's allreduce starts as soon as its
  // parameters are ready); tg::dist::average_gradients(model, *comm) after backward gives the
  // same values, without the overlap.
  tg::dist::GradientReducer reducer(model, *comm);
  tg::Rng data(0);  // the same seed on every rank, so every rank draws the same global batches

  double first_loss = 0, loss = 0;
  try {
    for (int step = 0; step < kSteps; ++step) {
      tg::Tensor X, Y;
      draw_batch(data, X, Y);
      // Local work (forward, backward) may fail on one rank; the ranks agree before going on. A
      // pass that ends in an exception still completes its allreduces, so the ranks stay in step.
      tg::Tensor slice_loss;
      tg::dist::run_agreed(*comm, [&] {
        model.zero_grad();
        auto pass = reducer.begin();
        tg::Tensor x = tg::narrow(X, 0, first, rows), y = tg::narrow(Y, 0, first, rows);
        tg::Tensor d = tg::sub(model.forward(x), y);  // (rows, 1)
        slice_loss = tg::mean(tg::mul(d, d));         // ()
        slice_loss.backward();
        pass.finish();  // grads of the global batch's mean loss, on every rank
      });
      tg::optim::clip_grad_norm(model.named_parameters(), 1.0);  // same grads: same clipping
      opt.step();

      double global = slice_loss.item();  // the global batch's loss: the mean over the slices
      comm->allreduce_sum(&global, 1);
      loss = global / ranks;
      if (step == 0) first_loss = loss;
      if (lead && step % 50 == 0) std::printf("step %3d  loss %.6f\n", step, loss);
    }
  } catch (const tg::dist::RankError& e) {
    if (lead) std::cerr << "data_parallel: " << e.what() << "\n";
    return e.status();
  }

  const double drift = drift_from_rank0(model, *comm);
  if (lead)
    std::printf("%d rank(s): loss %.6f -> %.6f, replicas differ by %.1e\n", ranks, first_loss, loss,
                drift);
  return loss < 0.5 * first_loss && drift == 0 ? 0 : 1;
}
