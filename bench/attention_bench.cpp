// Attention forward and forward+backward at the sizes people run, in float and double, next to
// the hand-written baseline. H = 1 is the single-head model. Threads: OMP_NUM_THREADS (OpenMP's
// default is every core); compare_pytorch.py sets it.

#include <benchmark/benchmark.h>

#include <memory>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/static_step.h>
#include "bench/baseline.h"
#include "bench/flops.h"
#include <tapegrad/nn/attention.h>

namespace {

using tg::bench::attention_fwd_flops;
using tg::bench::attention_fwdbwd_flops;

struct Case {
  int64_t B, T, D, H;
};

Case read_case(const benchmark::State& st) {
  return {st.range(0), st.range(1), st.range(2), st.range(3)};
}

template <class T>
std::unique_ptr<tg::nn::QKVAttention> make_layer(const Case& c, tg::Rng& rng, bool fused = true) {
  tg::AttentionOptions o;
  o.heads = c.H;
  o.need_weights = !fused;  // fused: what a user who wants speed runs
  return std::make_unique<tg::nn::QKVAttention>(c.D, c.D, c.D, o, /*output_proj=*/true, rng,
                                                tg::dtype_of<T>(), 1.0 / std::sqrt(double(c.D)));
}

// "FLOP/s" counts the dense attention products (the number to set beside PyTorch's composed
// path); "useful FLOP/s" only what the causal mask leaves (the number to set beside the GEMM
// peak, BM_Gemm_Peak). See flops.h.
void set_flops(benchmark::State& st, const Case& c, bool backward) {
  const auto rate = benchmark::Counter::kIsIterationInvariantRate;
  st.counters["FLOP/s"] = benchmark::Counter(
      backward ? attention_fwdbwd_flops(c.B, c.T, c.D) : attention_fwd_flops(c.B, c.T, c.D), rate);
  st.counters["useful FLOP/s"] =
      benchmark::Counter(backward ? tg::bench::attention_fwdbwd_useful_flops(c.B, c.T, c.D)
                                  : tg::bench::attention_fwd_useful_flops(c.B, c.T, c.D),
                         rate);
}

template <class T>
void BM_Attention_Fwd(benchmark::State& st) {
  const Case c = read_case(st);
  tg::Rng rng(0);
  const auto layer = make_layer<T>(c, rng);
  const tg::Tensor X = tg::randn({c.B, c.T, c.D}, rng, tg::dtype_of<T>());
  tg::NoGradGuard no_grad;
  for (auto _ : st) {
    const tg::Tensor Y = layer->forward(X).Y;
    benchmark::DoNotOptimize(Y.data<T>());
  }
  set_flops(st, c, /*backward=*/false);
}

// Forward + backward of L = 0.5 * sum(Y^2) into every weight, fused or composed.
template <class T>
void fwd_bwd(benchmark::State& st, bool fused) {
  const Case c = read_case(st);
  tg::Rng rng(0);
  const auto layer = make_layer<T>(c, rng, fused);
  const tg::Tensor X = tg::randn({c.B, c.T, c.D}, rng, tg::dtype_of<T>());
  const std::vector<tg::Tensor> params = layer->parameters();
  for (auto _ : st) {
    for (const tg::Tensor& p : params) p.zero_grad();
    const tg::Tensor L = tg::attention_loss(layer->forward(X).Y);
    L.backward();
    benchmark::DoNotOptimize(params[0].grad().data<T>());
  }
  set_flops(st, c, /*backward=*/true);
}

template <class T>
void BM_Attention_FwdBwd(benchmark::State& st) {
  fwd_bwd<T>(st, /*fused=*/true);
}

// The composed path (need_weights: A on the tape), for the memory comparison and to show what
// the fused op saves.
template <class T>
void BM_AttentionComposed_FwdBwd(benchmark::State& st) {
  fwd_bwd<T>(st, /*fused=*/false);
}

// The fused case's step replayed by a StaticStep (autograd/static_step.h): the recorded tape's
// nodes kept, the ops' closures made again.
template <class T>
void BM_Attention_FwdBwdReplay(benchmark::State& st) {
  const Case c = read_case(st);
  tg::Rng rng(0);
  const auto layer = make_layer<T>(c, rng);
  const tg::Tensor X = tg::randn({c.B, c.T, c.D}, rng, tg::dtype_of<T>());
  const std::vector<tg::Tensor> params = layer->parameters();
  tg::StaticStep step([&](const std::vector<tg::Tensor>& in) {
    return tg::attention_loss(layer->forward(in[0]).Y);
  });
  for (int i = 0; i < 2; ++i) step({X});  // the first call runs eagerly, the second records
  for (auto _ : st) {
    for (const tg::Tensor& p : params) p.zero_grad();
    benchmark::DoNotOptimize(step({X}).data<T>());
  }
  set_flops(st, c, /*backward=*/true);
}

template <class T>
void BM_AttentionBaseline_FwdBwd(benchmark::State& st) {
  const Case c = read_case(st);
  tg::bench::AttentionBaseline<T> baseline(c.B, c.T, c.D, c.H, 0);
  for (auto _ : st) benchmark::DoNotOptimize(baseline.run());
  set_flops(st, c, /*backward=*/true);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (const auto& a : std::vector<std::vector<int64_t>>{
           {1, 8, 4, 1}, {1, 64, 64, 4}, {1, 256, 256, 4}, {1, 1024, 512, 8}, {4, 512, 256, 8}})
    b->Args(a);
  b->ArgNames({"B", "T", "D", "H"})->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_Attention_Fwd, float)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Attention_Fwd, double)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Attention_FwdBwd, float)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Attention_FwdBwd, double)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Attention_FwdBwdReplay, float)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_Attention_FwdBwdReplay, double)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_AttentionComposed_FwdBwd, float)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_AttentionComposed_FwdBwd, double)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_AttentionBaseline_FwdBwd, float)->Apply(sizes);
BENCHMARK_TEMPLATE(BM_AttentionBaseline_FwdBwd, double)->Apply(sizes);

// The memory case: peak RSS of one forward+backward, fused against composed (compare_pytorch.py
// runs each alone in a fresh process and reads its maximum resident set).
BENCHMARK_TEMPLATE(BM_Attention_FwdBwd, float)
    ->Args({1, 4096, 256, 4})
    ->ArgNames({"B", "T", "D", "H"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_AttentionComposed_FwdBwd, float)
    ->Args({1, 4096, 256, 4})
    ->ArgNames({"B", "T", "D", "H"})
    ->Unit(benchmark::kMillisecond);
