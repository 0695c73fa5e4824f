// pytorch/examples' MNIST Net (nn::MnistNet) through one training step as `tapegrad train
// --images DIR --arch cnn` takes it: forward on a batch of 64 images in train mode (dropout on),
// the mean cross-entropy against the labels, backward, the gradient norm, AdamW's update and
// zero_grad. The step of #21's epoch, on random images.

#include <benchmark/benchmark.h>

#include <cstdint>

#include "bench/flops.h"
#include <tapegrad/nn/image_classifiers.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/optim/adamw.h>
#include <tapegrad/optim/clip_grad.h>

namespace {

template <class T>
void BM_MnistNet_TrainStep(benchmark::State& st) {
  const int64_t N = st.range(0);
  tg::Rng rng(0);
  tg::nn::MnistNetConfig config;
  config.dtype = tg::dtype_of<T>();
  tg::nn::MnistNet net(config, rng);
  const tg::Tensor x = tg::randn({N, 1, 28, 28}, rng, config.dtype);
  const tg::Tensor labels = tg::randint(0, 10, {N}, rng);
  const tg::NamedTensors params = net.named_parameters();
  tg::optim::AdamW opt(params, 1e-3, {0.9, 0.999}, 1e-8, 0.01, 0);
  const auto step = [&] {
    tg::cross_entropy(net.forward(x), labels, -1).backward();
    benchmark::DoNotOptimize(tg::optim::grad_norm(params));
    opt.step();
    opt.zero_grad();
  };
  step();  // first touch of the gradients, AdamW's moments and the allocator's cache
  for (auto _ : st) step();
  st.counters["useful FLOP/s"] = benchmark::Counter(tg::bench::mnist_net_train_flops(N),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_MnistNet_TrainStep, float)
    ->ArgName("N")
    ->Arg(64)
    ->Unit(benchmark::kMillisecond);
