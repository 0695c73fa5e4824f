// nanoGPT's CPU recipe (shakespeare_char on a laptop: 4 layers, 4 heads, 128 channels, block 64,
// batch 12) as a whole: one training step, greedy generation with the KV cache, and the
// machine's GEMM peak that the FLOP/s counters are read against. compare_pytorch.py --gpt runs
// the same training step in PyTorch eager beside BM_GPT_TrainStep. BM_Llama_TrainStep is the
// Llama's step at the recipe's size (with and without grouped-query attention); both report
// params x tokens/s, the rate to compare a GPT and a Llama of other parameter counts by.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/static_step.h>
#include "bench/flops.h"
#include <tapegrad/nn/gpt.h>
#include <tapegrad/nn/llama.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/ops/threads.h>
#include <tapegrad/optim/optim.h>

namespace {

struct GPTCase {
  int64_t V, L, H, C, T, B;
};

GPTCase read_case(const benchmark::State& st) {
  return {st.range(0), st.range(1), st.range(2), st.range(3), st.range(4), st.range(5)};
}

template <class T>
tg::nn::GPTConfig make_config(const GPTCase& c) {
  tg::nn::GPTConfig config;
  config.vocab_size = c.V;
  config.n_layer = c.L;
  config.n_head = c.H;
  config.n_embd = c.C;
  config.block_size = c.T;
  config.dropout = 0.0;  // the recipe's dropout 0: the step is the same work as PyTorch's
  config.dtype = tg::dtype_of<T>();
  return config;
}

// Uniform tokens in [0, V), (B, T): the speed of a step does not depend on the text.
tg::Tensor random_tokens(int64_t V, int64_t B, int64_t T, tg::Rng& rng) {
  std::uniform_int_distribution<int64_t> token(0, V - 1);
  std::vector<int64_t> values(static_cast<size_t>(B * T));
  for (int64_t& v : values) v = token(rng.engine());
  return tg::from_indices(values, {B, T});
}

// One update as tools/train_cmd.cpp makes it (and nanoGPT's train.py): forward, cross-entropy,
// backward, clip to norm 1, AdamW, zero_grad.
// (With a StaticStep, its forward and backward are the step's replay.)
template <class Model>
void train_step(const Model& model, tg::optim::AdamW& opt, const tg::NamedTensors& params,
                const tg::Tensor& x, const tg::Tensor& y, tg::StaticStep* step = nullptr) {
  if (step) {
    (*step)({x, y});
  } else {
    const tg::Tensor loss = model.loss(x, y);
    loss.backward();
  }
  benchmark::DoNotOptimize(tg::optim::clip_grad_norm(params, 1.0));
  opt.step();
  opt.zero_grad();
}

// The parameters' entries.
double count(const tg::NamedTensors& params) {
  double n = 0;
  for (const auto& [name, p] : params) n += static_cast<double>(p.numel());
  return n;
}

// Steps of `model` on random tokens, timed after two warm-up steps (see below); returns the
// timed steps' wall time in seconds.
template <class Model>
double time_steps(benchmark::State& st, const Model& model, int64_t V, int64_t B, int64_t T,
                tg::Rng& rng, bool replayed = false) {
  const tg::NamedTensors params = model.named_parameters();
  // nanoGPT's shakespeare_char settings: lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on the
  // matrices and embeddings only.
  tg::optim::AdamW opt(params, tg::optim::AdamWOptions{1e-3, 0.9, 0.99, 1e-8, 0.1, 2});
  const tg::Tensor x = random_tokens(V, B, T, rng);
  const tg::Tensor y = random_tokens(V, B, T, rng);
  // Two steps outside the timing: the first touches every fresh page (gradients, AdamW's
  // moments, the allocator's cache), which costs ~100 ms per 32 MB here and is not a step's
  // steady cost; PyTorch's side warms up the same way.
  // A StaticStep's first call runs eagerly and its second records: the timed ones replay.
  std::optional<tg::StaticStep> step;
  if (replayed)
    step.emplace([&](const std::vector<tg::Tensor>& in) { return model.loss(in[0], in[1]); });
  tg::StaticStep* s = step ? &*step : nullptr;
  for (int i = 0; i < 2; ++i) train_step(model, opt, params, x, y, s);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : st) train_step(model, opt, params, x, y, s);
  const auto end = std::chrono::steady_clock::now();
  const double tokens = double(B) * double(T);
  const auto rate = benchmark::Counter::kIsIterationInvariantRate;
  st.counters["tokens/s"] = benchmark::Counter(tokens, rate);
  st.counters["params"] = count(params);
  st.counters["params*tokens/s"] = benchmark::Counter(tokens * count(params), rate);
  return std::chrono::duration<double>(end - start).count();
}

// The GEMM peak BM_Gemm_Peak measures (a 1024^3 tg::matmul), measured once per dtype and thread
// count in this process: the fastest of 20 products after one to warm up.
template <class T>
double gemm_peak_flops() {
  static std::map<int, double> peaks;  // by team size
  const int team = tg::detail::team_size();
  if (const auto at = peaks.find(team); at != peaks.end()) return at->second;
  constexpr int64_t N = 1024;
  tg::Rng rng(1);
  const tg::Tensor a = tg::randn({N, N}, rng, tg::dtype_of<T>());
  const tg::Tensor b = tg::randn({N, N}, rng, tg::dtype_of<T>());
  tg::NoGradGuard no_grad;
  benchmark::DoNotOptimize(tg::matmul(a, b).data<T>());
  double best = 1e300;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(tg::matmul(a, b).data<T>());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  return peaks[team] = tg::bench::matmul_flops(N, N, N) / best;
}

// "FLOP/s" is nanoGPT's estimate (the number to set beside PyTorch's); "useful FLOP/s" what the
// step must compute (flops.h), and "of GEMM peak" that rate over the GEMM peak measured in the
// same process at the same thread count (gemm_peak_flops), from the steps' own wall time.
template <class T>
void train_step_counters(benchmark::State& st, const GPTCase& c, int64_t block_size,
                         bool replayed = false) {
  tg::Rng rng(0);
  tg::nn::GPTConfig config = make_config<T>(c);
  config.block_size = block_size;
  tg::nn::GPT model(config, rng);
  model.train();
  const double peak = gemm_peak_flops<T>();
  const double seconds = time_steps(st, model, c.V, c.B, c.T, rng, replayed);
  const double tokens = double(c.B) * double(c.T);
  const double useful = tokens * tg::bench::gpt_train_useful_flops_per_token(c.V, c.L, c.C, c.T);
  const auto rate = benchmark::Counter::kIsIterationInvariantRate;
  st.counters["FLOP/s"] =
      benchmark::Counter(tokens * tg::bench::gpt_train_flops_per_token(c.V, c.L, c.C, c.T), rate);
  st.counters["useful FLOP/s"] = benchmark::Counter(useful, rate);
  st.counters["GEMM peak FLOP/s"] = peak;
  st.counters["of GEMM peak"] = useful * double(st.iterations()) / seconds / peak;
}

template <class T>
void BM_GPT_TrainStep(benchmark::State& st) {
  const GPTCase c = read_case(st);
  train_step_counters<T>(st, c, c.T);
}

// The same step replayed by a StaticStep (autograd/static_step.h): the recorded tape's nodes
// kept, the ops' closures made again, the buffers the tape saved written in place.
template <class T>
void BM_GPT_TrainStepReplay(benchmark::State& st) {
  const GPTCase c = read_case(st);
  train_step_counters<T>(st, c, c.T, true);
}

// GPT-2 small (124M parameters: V 50257, L 12, H 12, C 768, its 1024 positions) trained on
// sequences of T tokens, B at a time: llm.c's CPU setting is T 64, B 4 (about 190 GFLOP a step).
// compare_pytorch.py --gpt2 runs it beside PyTorch eager (and llm.c's train_gpt2, given a
// checkout).
template <class T>
void BM_GPT2_TrainStep(benchmark::State& st) {
  train_step_counters<T>(st, read_case(st), 1024);
}

// Activation checkpointing's case: a GPT of 8 layers, 256 wide, block 256, batch 16, its blocks
// under tg::checkpoint (K 1) or not (K 0): the recomputation's cost is the time ratio of the two
// (bench/checkpoint_memory.py measures their peak RSS).
template <class T>
void BM_GPT_TrainStepCheckpoint(benchmark::State& st) {
  const GPTCase c = read_case(st);
  tg::Rng rng(0);
  tg::nn::GPT model(make_config<T>(c), rng);
  model.set_checkpoint_blocks(st.range(6) != 0);
  model.train();
  time_steps(st, model, c.V, c.B, c.T, rng);
}

// Anomaly mode's cost: the recipe's step without a tg::AnomalyGuard (A 0; what every step pays:
// one flag test per node) and with one (A 1: every gradient scanned for NaN and infinity).
template <class T>
void BM_GPT_TrainStepAnomaly(benchmark::State& st) {
  const GPTCase c = read_case(st);
  tg::Rng rng(0);
  tg::nn::GPT model(make_config<T>(c), rng);
  model.train();
  std::optional<tg::AnomalyGuard> guard;
  if (st.range(6) != 0) guard.emplace();
  time_steps(st, model, c.V, c.B, c.T, rng);
}

// The Llama at the recipe's size: V, L, H, H_kv, C, T, B; the MLP 8/3 C wide (344 for 128), as
// `tapegrad train --arch llama` builds it.
template <class T>
void BM_Llama_TrainStep(benchmark::State& st) {
  const int64_t V = st.range(0), L = st.range(1), H = st.range(2), KV = st.range(3),
                C = st.range(4), Tn = st.range(5), B = st.range(6);
  const tg::nn::LlamaConfig config{.vocab_size = V, .hidden_size = C,
                                   .intermediate_size = (8 * C / 3 + 7) / 8 * 8,
                                   .num_hidden_layers = L, .num_attention_heads = H,
                                   .num_key_value_heads = KV, .max_position_embeddings = Tn,
                                   .dtype = tg::dtype_of<T>()};
  tg::Rng rng(0);
  tg::nn::Llama model(config, rng);
  model.train();
  time_steps(st, model, V, B, Tn, rng);
  st.counters["FLOP/s"] = benchmark::Counter(
      double(B) * double(Tn) *
          tg::bench::llama_train_flops_per_token(V, L, C, config.intermediate_size, H, KV, Tn),
      benchmark::Counter::kIsIterationInvariantRate);
}

// The largest logit of the last position: greedy decoding.
template <class T>
int64_t argmax_last(const tg::Tensor& logits) {
  const int64_t V = logits.size(-1);
  const T* row = logits.data<T>() + (logits.numel() - V);
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// Greedy generation from a 1-token prompt to block_size tokens, one token per forward_cached
// call (the way `tapegrad sample` runs), so each new token costs O(T) attention, not O(T^2).
template <class T>
void BM_GPT_Sample(benchmark::State& st) {
  const GPTCase c = read_case(st);
  tg::Rng rng(0);
  tg::nn::GPT model(make_config<T>(c), rng);
  model.eval();
  const auto generate = [&] {
    tg::nn::KVCache cache;
    int64_t token = 0;
    for (int64_t t = 1; t < c.T; ++t)
      token = argmax_last<T>(model.forward_cached(tg::from_indices({token}, {1, 1}), cache));
    return token;
  };
  benchmark::DoNotOptimize(generate());  // warm-up, as in the training step
  for (auto _ : st) benchmark::DoNotOptimize(generate());
  st.counters["tokens/s"] =
      benchmark::Counter(double(c.T - 1), benchmark::Counter::kIsIterationInvariantRate);
}

// The reference for "percent of peak": one large square product through tg::matmul (BLIS
// underneath), no tape, at N large enough that packing and thread start-up are noise.
template <class T>
void BM_Gemm_Peak(benchmark::State& st) {
  const int64_t N = st.range(0);
  tg::Rng rng(0);
  const tg::Tensor a = tg::randn({N, N}, rng, tg::dtype_of<T>());
  const tg::Tensor b = tg::randn({N, N}, rng, tg::dtype_of<T>());
  tg::NoGradGuard no_grad;
  benchmark::DoNotOptimize(tg::matmul(a, b).data<T>());  // first touch of the output buffer
  st.SetLabel("BLIS kernels: " + tg::detail::blas_kernels());
  for (auto _ : st) benchmark::DoNotOptimize(tg::matmul(a, b).data<T>());
  st.counters["FLOP/s"] = benchmark::Counter(tg::bench::matmul_flops(N, N, N),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

void recipe(benchmark::internal::Benchmark* b) {
  b->Args({65, 4, 4, 128, 64, 12})->ArgNames({"V", "L", "H", "C", "T", "B"});
  b->Unit(benchmark::kMillisecond);
}

void llama_recipe(benchmark::internal::Benchmark* b) {
  b->Args({65, 4, 4, 4, 128, 64, 12})->Args({65, 4, 4, 2, 128, 64, 12});
  b->ArgNames({"V", "L", "H", "KV", "C", "T", "B"})->Unit(benchmark::kMillisecond);
}

void gemm_size(benchmark::internal::Benchmark* b) {
  b->Args({1024})->ArgNames({"N"})->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_GPT_TrainStep, float)->Apply(recipe);
BENCHMARK_TEMPLATE(BM_GPT_TrainStep, double)->Apply(recipe);
BENCHMARK_TEMPLATE(BM_GPT_TrainStepReplay, float)->Apply(recipe);
BENCHMARK_TEMPLATE(BM_GPT2_TrainStep, float)
    ->Args({50257, 12, 12, 768, 64, 4})
    ->ArgNames({"V", "L", "H", "C", "T", "B"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_GPT_TrainStepCheckpoint, float)
    ->Args({65, 8, 8, 256, 256, 16, 0})
    ->Args({65, 8, 8, 256, 256, 16, 1})
    ->ArgNames({"V", "L", "H", "C", "T", "B", "K"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_GPT_TrainStepAnomaly, float)
    ->Args({65, 4, 4, 128, 64, 12, 0})
    ->Args({65, 4, 4, 128, 64, 12, 1})
    ->ArgNames({"V", "L", "H", "C", "T", "B", "A"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_Llama_TrainStep, float)->Apply(llama_recipe);
BENCHMARK_TEMPLATE(BM_Llama_TrainStep, double)->Apply(llama_recipe);
BENCHMARK_TEMPLATE(BM_GPT_Sample, float)->Apply(recipe);
BENCHMARK_TEMPLATE(BM_GPT_Sample, double)->Apply(recipe);
// GPT-2 small's width (C 768, 12 heads) over 2 layers: each token's Linear products are one row
// against a weight large enough for BLIS (1 x 768 x 2304 for the projection to Q, K, V).
BENCHMARK_TEMPLATE(BM_GPT_Sample, float)
    ->Args({65, 2, 12, 768, 64, 1})
    ->ArgNames({"V", "L", "H", "C", "T", "B"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_Gemm_Peak, float)->Apply(gemm_size);
BENCHMARK_TEMPLATE(BM_Gemm_Peak, double)->Apply(gemm_size);
