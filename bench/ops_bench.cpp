// Each op alone, forward and forward+backward (backward with a random grad_output), at one
// attention-like size per op, float and double.

#include <benchmark/benchmark.h>

#include <cctype>
#include <string>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/node.h>
#include "bench/flops.h"
#include <tapegrad/ops/op_list.h>
#include <tapegrad/ops/ops.h>

namespace {

// Forward only (no tape) or forward + backward of op(inputs) for the benchmark loop.
template <class T>
void run_op(benchmark::State& st, const tg::OpInfo& info, bool backward, double flops = 0) {
  tg::Rng rng(0);
  std::vector<tg::Tensor> in;
  for (const auto& s : info.sample_shapes) {
    in.push_back(tg::in_domain(info, tg::randn(s, rng, tg::dtype_of<T>())));
  }
  const auto& op = info.call;
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

// X (N, C_in, H, H), W (C_out, C_in, 3, 3), b (C_out) from the benchmark's arguments.
template <class T>
void run_conv2d(benchmark::State& st, bool backward) {
  const int64_t N = st.range(0), C_in = st.range(1), C_out = st.range(2), H = st.range(3);
  tg::OpInfo info{"conv2d", tg::OpKind::other, tg::OpDomain::real,
                  {{N, C_in, H, H}, {C_out, C_in, 3, 3}, {C_out}},
                  [](const std::vector<tg::Tensor>& x) { return tg::conv2d(x[0], x[1], x[2]); }};
  const double fwd = tg::bench::conv2d_fwd_flops(N, C_out, H - 2, H - 2, C_in, 3, 3);
  run_op<T>(st, info, backward, backward ? 3 * fwd : fwd);
}

// The FLOPs of one forward of an op on its sample shapes, for the compute-bound ops; 0 for
// the memory-bound ones (no FLOP/s counter).
double fwd_flops(const tg::OpInfo& op) {
  const std::vector<tg::Shape>& s = op.sample_shapes;
  const std::string name = op.name;
  if (name == "matmul") return tg::bench::matmul_flops(s[0].numel() / s[0][s[0].rank() - 1],
                                                       s[0][s[0].rank() - 1], s[1][1]);
  if (name == "linear")  // X (..., in) W (out, in)^T: the product's FLOPs (the bias adds rows x out)
    return tg::bench::matmul_flops(s[0].numel() / s[1][1], s[1][1], s[1][0]);
  if (name == "causal_attention" || name == "causal_attention_heads") {
    const tg::Shape& q = s[0];  // (N, T, d) entries (packed heads count as d in total)
    const double entries = q.numel() / (q[q.rank() - 2] * q[q.rank() - 1]);
    return 2 * entries * tg::bench::matmul_flops(q[q.rank() - 2], q[q.rank() - 1], q[q.rank() - 2]);
  }
  if (name == "causal_attention_qkv") {
    const tg::Shape& qkv = s[0];  // (B, T, 3 C): attention of (B, T, C) packed heads
    const int64_t T = qkv[qkv.rank() - 2], C = qkv[qkv.rank() - 1] / 3;
    return 2 * (qkv.numel() / (T * 3 * C)) * tg::bench::matmul_flops(T, C, T);
  }
  if (name == "conv2d" || name == "conv1d") {  // stride 1, no padding, groups 1
    const tg::Shape& x = s[0];
    const tg::Shape& w = s[1];
    const bool two = name == "conv2d";
    const int64_t kh = two ? w[2] : 1, kw = w[w.rank() - 1];
    const int64_t Ho = two ? x[2] - kh + 1 : 1, Wo = x[x.rank() - 1] - kw + 1;
    return tg::bench::conv2d_fwd_flops(x[0], w[0], Ho, Wo, w[1], kh, kw);
  }
  return 0;
}

// "causal_attention" -> "CausalAttention".
std::string camel(const char* name) {
  std::string out;
  bool up = true;
  for (const char* c = name; *c; ++c) {
    if (*c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
    up = false;
  }
  return out;
}

// BM_<Op>_Fwd<float>, BM_<Op>_FwdBwd<double>, ...: four benchmarks per op of the op list, on
// its sample shapes.
template <class T>
void register_rows(const char* type) {
  for (const tg::OpInfo& op : tg::op_list())
    for (bool backward : {false, true}) {
      const std::string name =
          "BM_" + camel(op.name) + (backward ? "_FwdBwd<" : "_Fwd<") + type + ">";
      const double flops = backward ? 3 * fwd_flops(op) : fwd_flops(op);
      benchmark::RegisterBenchmark(name.c_str(), [&op, backward, flops](benchmark::State& st) {
        run_op<T>(st, op, backward, flops);
      })->Unit(benchmark::kMicrosecond);
    }
}

// conv2d at pytorch/examples' MNIST Net shapes (3 x 3, stride 1, no padding): conv1 (1 -> 32 at
// 28 x 28) and conv2 (32 -> 64 at 26 x 26), batch 64; FwdBwd gives every input a gradient (X too).
template <class T>
void BM_Conv2d_MNIST_Fwd(benchmark::State& st) {
  run_conv2d<T>(st, false);
}
template <class T>
void BM_Conv2d_MNIST_FwdBwd(benchmark::State& st) {
  run_conv2d<T>(st, true);
}
void mnist_sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C_in", "C_out", "H"})->Args({64, 1, 32, 28})->Args({64, 32, 64, 26});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK_TEMPLATE(BM_Conv2d_MNIST_Fwd, float)->Apply(mnist_sizes);
BENCHMARK_TEMPLATE(BM_Conv2d_MNIST_FwdBwd, float)->Apply(mnist_sizes);
BENCHMARK_TEMPLATE(BM_Conv2d_MNIST_Fwd, double)->Apply(mnist_sizes);
BENCHMARK_TEMPLATE(BM_Conv2d_MNIST_FwdBwd, double)->Apply(mnist_sizes);

// gelu's exact (erf) form, PyTorch's default and nn::GELU()'s, on the op list's activation shape
// (the list's gelu row is the tanh form, GPT-2's).
template <class T>
void run_gelu_erf(benchmark::State& st, bool backward) {
  const tg::OpInfo* gelu = nullptr;
  for (const tg::OpInfo& op : tg::op_list())
    if (std::string(op.name) == "gelu") gelu = &op;
  if (!gelu) {
    st.SkipWithError("no gelu in the op list");
    return;
  }
  tg::OpInfo info{"gelu", tg::OpKind::unary, tg::OpDomain::real, gelu->sample_shapes,
                  [](const std::vector<tg::Tensor>& x) { return tg::gelu(x[0]); }};
  run_op<T>(st, info, backward);
}
template <class T>
void BM_GeluErf_Fwd(benchmark::State& st) {
  run_gelu_erf<T>(st, false);
}
template <class T>
void BM_GeluErf_FwdBwd(benchmark::State& st) {
  run_gelu_erf<T>(st, true);
}
BENCHMARK_TEMPLATE(BM_GeluErf_Fwd, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_GeluErf_FwdBwd, float)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_GeluErf_Fwd, double)->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(BM_GeluErf_FwdBwd, double)->Unit(benchmark::kMicrosecond);

const bool registered = [] {
  register_rows<float>("float");
  register_rows<double>("double");
  return true;
}();

}  // namespace
