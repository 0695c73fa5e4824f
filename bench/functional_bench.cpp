// The functional API (check/functional.h) at work: the full Hessian of a 2-layer tanh MLP's
// loss in its ~1,000 parameters (one backward through the double graph per row: reverse over
// reverse) and a Hessian-vector product of a small GPT's loss in all its parameters (PyTorch's
// double-backward trick: three backwards). compare_pytorch.py --functional times the same two
// with torch.autograd.functional (hessian(vectorize=True), hvp) in bench/torch_side.py.
// BM_Functional_JvpGpt: forward mode's jvp of a GPT's loss against its plain forward.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/check/functional.h>
#include <tapegrad/nn/gpt.h>
#include <tapegrad/ops/ops.h>

namespace {

// MLP: x (N, D) -> tanh(x W1^T + b1) (N, Hd) -> W2 (O, Hd), b2 (O); loss mean((y - t)^2).
template <class T>
void BM_Functional_HessianMlp(benchmark::State& st) {
  const int64_t N = st.range(0), D = st.range(1), Hd = st.range(2), O = st.range(3);
  const tg::Dtype dt = tg::dtype_of<T>();
  tg::Rng rng(0);
  const tg::Tensor x = tg::randn({N, D}, rng, dt), t = tg::randn({N, O}, rng, dt);
  const std::vector<tg::Tensor> params = {
      tg::randn({Hd, D}, rng, dt, 0.3), tg::randn({Hd}, rng, dt, 0.1),
      tg::randn({O, Hd}, rng, dt, 0.3), tg::randn({O}, rng, dt, 0.1)};
  const tg::Function loss = [&](const std::vector<tg::Tensor>& p) {
    const tg::Tensor h = tg::tanh(tg::add(tg::matmul(x, p[0], false, true), p[1]));  // (N, Hd)
    const tg::Tensor d = tg::sub(tg::add(tg::matmul(h, p[2], false, true), p[3]), t);  // (N, O)
    return std::vector<tg::Tensor>{tg::mean(tg::mul(d, d))};
  };
  benchmark::DoNotOptimize(tg::hessian(loss, params));  // warm-up: the allocator's cache
  for (auto _ : st) benchmark::DoNotOptimize(tg::hessian(loss, params));
  st.counters["params"] = double(Hd * D + Hd + O * Hd + O);
}

// A GPT (V, L, H, C, block T) on a batch (B, T), dropout 0, its loss as a function of all its
// parameters; v random, of the parameters' shapes.
template <class T>
struct GptLoss {
  tg::nn::GPT model;
  tg::Tensor idx, targets;
  std::vector<std::string> names;
  std::vector<tg::Tensor> params, v;
  tg::Function loss;

  GptLoss(const benchmark::State& st, tg::Rng& rng) : model(config(st), rng) {
    const int64_t V = st.range(0), B = st.range(5), Tn = st.range(4);
    std::uniform_int_distribution<int64_t> token(0, V - 1);
    std::vector<int64_t> ids(static_cast<size_t>(2 * B * Tn));
    for (int64_t& id : ids) id = token(rng.engine());
    idx = tg::from_indices({ids.begin(), ids.begin() + B * Tn}, {B, Tn});
    targets = tg::from_indices({ids.begin() + B * Tn, ids.end()}, {B, Tn});
    for (const auto& [name, p] : model.named_parameters()) {
      names.push_back(name);
      params.push_back(p.detach());
      v.push_back(tg::randn(p.shape(), rng, p.dtype()));
    }
    loss = [this](const std::vector<tg::Tensor>& p) {
      for (std::size_t k = 0; k < names.size(); ++k) model.set_parameter(names[k], p[k]);
      return std::vector<tg::Tensor>{model.loss(idx, targets)};
    };
  }
  static tg::nn::GPTConfig config(const benchmark::State& st) {
    tg::nn::GPTConfig c;
    c.vocab_size = st.range(0);
    c.n_layer = st.range(1);
    c.n_head = st.range(2);
    c.n_embd = st.range(3);
    c.block_size = st.range(4);
    c.dropout = 0.0;
    c.dtype = tg::dtype_of<T>();
    return c;
  }
};

template <class T>
void BM_Functional_HvpGpt(benchmark::State& st) {
  tg::Rng rng(0);
  GptLoss<T> g(st, rng);
  benchmark::DoNotOptimize(tg::hvp(g.loss, g.params, g.v));
  for (auto _ : st) benchmark::DoNotOptimize(tg::hvp(g.loss, g.params, g.v));
}

// Forward mode's cost against the plain forward of the same loss with grad mode off (J 0): the
// jvp (one forward pass with dual inputs, every op's tangent rule, no backward) in all the
// parameters (J 1), and along the input only (J 2: the position embeddings, so the tangent enters
// with the embeddings and every weight is a constant). A product x W costs one GEMM, its tangent
// tx W + x tW two with a tangent on W and one without: the GEMMs alone make J 1 3x the forward's
// FLOPs and J 2 2.08x (the attention's tangent is four products where the forward has two).
// J 1 and 2 also run the plain forward every iteration, untimed and alternating with the jvp,
// and report the ratio of the two totals (`x_forward`): on a shared machine a ratio of two
// separate runs moves by tens of percent.
template <class T>
void BM_Functional_JvpGpt(benchmark::State& st) {
  tg::Rng rng(0);
  GptLoss<T> g(st, rng);
  const int64_t mode = st.range(6);
  std::size_t wpe = 0;
  while (g.names[wpe] != "transformer.wpe.weight") ++wpe;
  const tg::Function along_input = [&](const std::vector<tg::Tensor>& p) {
    std::vector<tg::Tensor> all = g.params;
    all[wpe] = p[0];
    return g.loss(all);
  };
  auto forward = [&] {
    const tg::NoGradGuard off;
    return g.loss(g.params)[0];
  };
  auto run = [&] {
    if (mode == 1) return tg::jvp(g.loss, g.params, g.v).jvps[0];
    if (mode == 2) return tg::jvp(along_input, {g.params[wpe]}, {g.v[wpe]}).jvps[0];
    return forward();
  };
  using Clock = std::chrono::steady_clock;
  benchmark::DoNotOptimize(run());
  benchmark::DoNotOptimize(forward());
  Clock::duration jvp_time{}, forward_time{};
  for (auto _ : st) {
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(run());
    jvp_time += Clock::now() - t0;
    if (mode == 0) continue;
    st.PauseTiming();
    const auto t1 = Clock::now();
    benchmark::DoNotOptimize(forward());
    forward_time += Clock::now() - t1;
    st.ResumeTiming();
  }
  if (mode != 0 && forward_time.count() > 0)
    st.counters["x_forward"] = std::chrono::duration<double>(jvp_time).count() /
                               std::chrono::duration<double>(forward_time).count();
}

void mlp_size(benchmark::internal::Benchmark* b) {
  b->Args({32, 16, 32, 14})->ArgNames({"N", "D", "H", "O"})->Unit(benchmark::kMillisecond);
}
void jvp_size(benchmark::internal::Benchmark* b) {
  for (int64_t j : {0, 1, 2}) b->Args({65, 4, 4, 128, 64, 12, j});
  b->ArgNames({"V", "L", "H", "C", "T", "B", "J"})->Unit(benchmark::kMillisecond);
}
void gpt_size(benchmark::internal::Benchmark* b) {
  b->Args({65, 2, 2, 64, 32, 4})->ArgNames({"V", "L", "H", "C", "T", "B"})->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_Functional_HessianMlp, float)->Apply(mlp_size);
BENCHMARK_TEMPLATE(BM_Functional_HessianMlp, double)->Apply(mlp_size);
BENCHMARK_TEMPLATE(BM_Functional_HvpGpt, float)->Apply(gpt_size);
BENCHMARK_TEMPLATE(BM_Functional_HvpGpt, double)->Apply(gpt_size);
// nanoGPT's CPU recipe (bench/gpt_bench.cpp): plain forward (J 0), jvp in every parameter (J 1),
// jvp along the input (J 2).
BENCHMARK_TEMPLATE(BM_Functional_JvpGpt, float)->Apply(jvp_size);
BENCHMARK_TEMPLATE(BM_Functional_JvpGpt, double)->Apply(jvp_size);

}  // namespace
