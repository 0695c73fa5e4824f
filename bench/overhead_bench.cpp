// What one op costs beyond its arithmetic: a chain of N scalar ops, y = y * w + b repeated, on
// leaves that take a gradient, forward and backward (a recorded op with its backward), or forward
// alone with no tape, or forward and backward replayed by a StaticStep. A scalar's arithmetic is
// one instruction, so the time is the op's overhead: checks, the result's tensor, the tape's
// node, the pass. Counters: "time/op", and "tape bytes/op",
// what the forward's graph holds per recorded op (the nodes, their closures, the outputs' tensors
// and buffers, malloc's own headers), measured as malloc's bytes in use with the graph alive
// against before it, on a fresh thread whose pools start empty, so that every block is counted.

#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cstdint>
#include <thread>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/static_step.h>
#include <tapegrad/ops/ops.h>

namespace {

struct Leaves {
  tg::Tensor x, w, b;
};

template <class T>
Leaves make_leaves() {
  const tg::Dtype dtype = tg::dtype_of<T>();
  const auto leaf = [&](double v) { return tg::full({}, v, dtype).set_requires_grad(); };
  return {leaf(0.5), leaf(0.999), leaf(0.001)};
}

// N ops: N / 2 multiply-adds.
tg::Tensor chain(const Leaves& l, int64_t n) {
  tg::Tensor y = l.x;
  for (int64_t i = 0; i < n / 2; ++i) y = tg::add(tg::mul(y, l.w), l.b);
  return y;
}

// Bytes malloc holds for the graph of an n-op chain, per op. Run on a fresh thread: its pools
// are empty, so the tape's blocks all come from malloc while the graph is built.
template <class T>
double tape_bytes_per_op(int64_t n) {
  double per_op = 0;
  std::thread([&] {
    const Leaves l = make_leaves<T>();
    const std::size_t before = mallinfo2().uordblks;
    tg::Tensor y = chain(l, n);
    const std::size_t after = mallinfo2().uordblks;
    per_op = double(after - before) / double(n);
  }).join();
  return per_op;
}

void set_time_per_op(benchmark::State& st, int64_t n) {
  st.counters["time/op"] = benchmark::Counter(
      double(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Forward and backward of the chain into the three leaves.
template <class T>
void BM_OpChain_FwdBwd(benchmark::State& st) {
  const int64_t n = st.range(0);
  // Measured first, on its own thread: from then on the process has two threads, as any program
  // using OpenMP does, and reference counts are updated atomically, as they are there.
  st.counters["tape bytes/op"] = tape_bytes_per_op<T>(n);
  const Leaves l = make_leaves<T>();
  for (auto _ : st) {
    l.x.zero_grad();
    l.w.zero_grad();
    l.b.zero_grad();
    chain(l, n).backward();
    benchmark::DoNotOptimize(l.w.grad().data<T>());
  }
  set_time_per_op(st, n);
}

// The forward alone, with no tape (NoGradGuard): what an op costs at inference.
template <class T>
void BM_OpChain_Fwd(benchmark::State& st) {
  const int64_t n = st.range(0);
  std::thread([] {}).join();  // two threads, as above
  const Leaves l = make_leaves<T>();
  tg::NoGradGuard no_grad;
  for (auto _ : st) benchmark::DoNotOptimize(chain(l, n).data<T>());
  set_time_per_op(st, n);
}

// Forward and backward of the chain as a StaticStep replays it (autograd/static_step.h): the
// recorded nodes and edges kept, each op's closures made again, the same backward pass.
template <class T>
void BM_OpChain_Replay(benchmark::State& st) {
  const int64_t n = st.range(0);
  std::thread([] {}).join();  // two threads, as above
  const Leaves l = make_leaves<T>();
  tg::StaticStep step([&](const std::vector<tg::Tensor>&) { return chain(l, n); });
  for (int i = 0; i < 2; ++i) step({});  // the first call runs eagerly, the second records
  for (auto _ : st) {
    l.x.zero_grad();
    l.w.zero_grad();
    l.b.zero_grad();
    benchmark::DoNotOptimize(step({}).data<T>());
  }
  set_time_per_op(st, n);
}

void chain_size(benchmark::internal::Benchmark* b) { b->Arg(256)->ArgName("N"); }

}  // namespace

BENCHMARK_TEMPLATE(BM_OpChain_FwdBwd, double)->Apply(chain_size);
BENCHMARK_TEMPLATE(BM_OpChain_FwdBwd, float)->Apply(chain_size);
BENCHMARK_TEMPLATE(BM_OpChain_Replay, double)->Apply(chain_size);
BENCHMARK_TEMPLATE(BM_OpChain_Replay, float)->Apply(chain_size);
BENCHMARK_TEMPLATE(BM_OpChain_Fwd, double)->Apply(chain_size);
BENCHMARK_TEMPLATE(BM_OpChain_Fwd, float)->Apply(chain_size);
