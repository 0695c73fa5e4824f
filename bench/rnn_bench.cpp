// A one-layer LSTM's (and GRU's) training pass: forward over the sequence, sum(output * w) with
// fixed random weights, backward into the input and every parameter (torch.nn.LSTM's work in a
// training step).

#include <benchmark/benchmark.h>

#include <cstdint>

#include "bench/flops.h"
#include <tapegrad/nn/rnn.h>
#include <tapegrad/ops/ops.h>

namespace {

template <class T>
void BM_LSTM_FwdBwd(benchmark::State& st) {
  const int64_t B = st.range(0), T_ = st.range(1), I = st.range(2), H = st.range(3);
  tg::Rng rng(0);
  const tg::Dtype dtype = tg::dtype_of<T>();
  tg::nn::LSTM lstm(I, H, rng, {}, dtype);
  const tg::Tensor x = tg::randn({T_, B, I}, rng, dtype).set_requires_grad();
  const tg::Tensor w = tg::randn({T_, B, H}, rng, dtype);
  const auto step = [&] {
    tg::sum(tg::mul(lstm(x).output, w)).backward();
    lstm.zero_grad();
    x.zero_grad();
  };
  step();  // first touch of the gradients and the allocator's cache, outside the timing
  for (auto _ : st) step();
  st.counters["FLOP/s"] = benchmark::Counter(tg::bench::lstm_fwdbwd_flops(B, T_, I, H),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

template <class T>
void BM_GRU_FwdBwd(benchmark::State& st) {
  const int64_t B = st.range(0), T_ = st.range(1), I = st.range(2), H = st.range(3);
  tg::Rng rng(0);
  const tg::Dtype dtype = tg::dtype_of<T>();
  tg::nn::GRU gru(I, H, rng, {}, dtype);
  const tg::Tensor x = tg::randn({T_, B, I}, rng, dtype).set_requires_grad();
  const tg::Tensor w = tg::randn({T_, B, H}, rng, dtype);
  const auto step = [&] {
    tg::sum(tg::mul(gru(x).output, w)).backward();
    gru.zero_grad();
    x.zero_grad();
  };
  step();
  for (auto _ : st) step();
  st.counters["FLOP/s"] = benchmark::Counter(tg::bench::gru_fwdbwd_flops(B, T_, I, H),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

void lstm_size(benchmark::internal::Benchmark* b) {
  b->Args({32, 64, 256, 256})->ArgNames({"B", "T", "I", "H"})->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_LSTM_FwdBwd, float)->Apply(lstm_size);
BENCHMARK_TEMPLATE(BM_LSTM_FwdBwd, double)->Apply(lstm_size);
BENCHMARK_TEMPLATE(BM_GRU_FwdBwd, float)->Apply(lstm_size);
