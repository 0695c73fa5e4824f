// Each op alone, forward and forward+backward (backward with a random grad_output), at one
// attention-like size per op, float and double.

#include <benchmark/benchmark.h>

#include <functional>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "bench/flops.h"
#include "ops/ops.h"

namespace {

using Op = std::function<tg::Tensor(const std::vector<tg::Tensor>&)>;

// Forward only (no tape) or forward + backward of op(inputs) for the benchmark loop.
template <class T>
void run_op(benchmark::State& st, const std::vector<tg::Shape>& shapes, const Op& op,
            bool backward, double flops = 0) {
  tg::Rng rng(0);
  std::vector<tg::Tensor> in;
  for (const auto& s : shapes) in.push_back(tg::randn(s, rng, tg::dtype_of<T>()));
  if (backward)
    for (auto& t : in) t.set_requires_grad();
  tg::Tensor g;
  {
    tg::NoGradGuard no_grad;
    g = tg::randn(op(in).shape(), rng, tg::dtype_of<T>());
  }
  for (auto _ : st) {
    if (!backward) {
      tg::NoGradGuard no_grad;
      benchmark::DoNotOptimize(op(in).data<T>());
    } else {
      const auto grads = tg::grad({op(in)}, in, {g});
      benchmark::DoNotOptimize(grads[0].data<T>());
    }
  }
  if (flops > 0)
    st.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

constexpr int64_t kBH = 8, kT = 256, kD = 64;

struct OpBench {
  const char* name;
  std::vector<tg::Shape> shapes;
  Op op;
  double fwd_flops;  // 0: a memory-bound op, no FLOP/s counter
};

std::vector<OpBench> table() {
  using tg::Tensor;
  using X = const std::vector<Tensor>&;
  const double mm = tg::bench::matmul_flops(kBH * kT, kD, kD);
  const double bmm = kBH * tg::bench::matmul_flops(kT, kD, kT);
  return {
      {"Matmul", {{kBH, kT, kD}, {kD, kD}}, [](X x) { return tg::matmul(x[0], x[1]); }, mm},
      {"MatmulBatched", {{kBH, kT, kD}, {kBH, kT, kD}},
       [](X x) { return tg::matmul(x[0], x[1], false, true); }, bmm},
      {"Transpose", {{kBH, kT, kD}}, [](X x) { return tg::transpose(x[0]); }, 0},
      {"Permute", {{2, kT, 4, kD}}, [](X x) { return tg::permute(x[0], {0, 2, 1, 3}); }, 0},
      {"Reshape", {{kBH, kT, kD}}, [](X x) { return tg::reshape(x[0], {-1, kD}); }, 0},
      {"Scale", {{kBH, kT, kT}}, [](X x) { return tg::scale(x[0], 0.125); }, 0},
      {"AddMask", {{kBH, kT, kT}},
       [](X x) { return tg::add_mask(x[0], tg::causal_mask(kT, x[0].dtype())); }, 0},
      {"Softmax", {{kBH, kT, kT}}, [](X x) { return tg::softmax(x[0]); }, 0},
      {"SumOfSquares", {{kBH, kT, kD}}, [](X x) { return tg::sum_of_squares(x[0]); }, 0},
      {"Add", {{kBH, kT, kD}, {kT, kD}}, [](X x) { return tg::add(x[0], x[1]); }, 0},
      {"Sub", {{kBH, kT, kD}, {kBH, kT, kD}}, [](X x) { return tg::sub(x[0], x[1]); }, 0},
      {"Mul", {{kBH, kT, kD}, {kBH, kT, kD}}, [](X x) { return tg::mul(x[0], x[1]); }, 0},
      {"Sum", {{kBH, kT, kD}}, [](X x) { return tg::sum(x[0], -1, true); }, 0},
      {"Rope", {{kBH, kT, kD}}, [](X x) { return tg::rope(x[0]); }, 0},
      {"CausalAttention", {{kBH, kT, kD}, {kBH, kT, kD}, {kBH, kT, kD}},
       [](X x) { return tg::causal_attention(x[0], x[1], x[2], 0.125); }, 2 * bmm},
  };
}

// BM_<Op>_Fwd<float>, BM_<Op>_FwdBwd<double>, ...: four benchmarks per row of the table.
template <class T>
void register_rows(const char* type) {
  for (const OpBench& row : table())
    for (bool backward : {false, true}) {
      const std::string name =
          std::string("BM_") + row.name + (backward ? "_FwdBwd<" : "_Fwd<") + type + ">";
      const double flops = backward ? 3 * row.fwd_flops : row.fwd_flops;
      benchmark::RegisterBenchmark(name.c_str(), [row, backward, flops](benchmark::State& st) {
        run_op<T>(st, row.shapes, row.op, backward, flops);
      })->Unit(benchmark::kMicrosecond);
    }
}

const bool registered = [] {
  register_rows<float>("float");
  register_rows<double>("double");
  return true;
}();

}  // namespace
