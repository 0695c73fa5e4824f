// Threads (NoGradGuard is thread-local; independent graphs on different threads are safe):
// several threads build and differentiate their own graphs at once, repeatedly, and must
// get exactly what one thread got alone; grad mode and the caching allocator are per thread, and
// a tensor may die on another thread than the one that made it; the kernels give the same bits
// for any OpenMP thread count. fuzz/tsan.sh runs this suite under ThreadSanitizer.
//
// Worker threads never call gtest: they record what they saw, and the main thread checks it after
// join (gtest's own locks live in an uninstrumented library).

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/autograd/storage.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/optim/optim.h>
#include "test_util.h"

namespace tg {
namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 3;

using Values = std::vector<double>;

void append(Values& out, const Tensor& t) {
  ASSERT_TRUE(t.defined());
  const Values v = t.to_vector();
  out.insert(out.end(), v.begin(), v.end());
}

// Bitwise equality (NaN-safe, and -0 != +0): threads must not change a single bit.
bool same_bits(const Values& a, const Values& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// ---- the workloads: each returns every value and gradient it computed ------------------------

// A graph through most ops, forward and backward, in `dtype`.
Values ops_workload(uint64_t seed, Dtype dtype) {
  Rng rng(seed);
  const Tensor x = randn({2, 3, 4}, rng, dtype).set_requires_grad();       // (B, T, D)
  const Tensor w = randn({4, 6}, rng, dtype, 0.5).set_requires_grad();     // (D, E)
  const Tensor b = randn({6}, rng, dtype).set_requires_grad();             // (E)
  const Tensor h = add(matmul(x, w), b);                                   // (2, 3, 6)
  const Tensor s = scale(matmul(h, rope(h), false, true), 0.4);            // (2, 3, 3)
  const Tensor a = softmax(add_mask(s, causal_mask(3, dtype, 2)));         // (2, 3, 3)
  const Tensor y = mul(matmul(a, h), sub(h, sum(h, 1, true)));             // (2, 3, 6)
  const Tensor z = reshape(permute(y, {1, 0, 2}), {3, 12});                // (3, 12)
  const Tensor u = transpose(matmul(z, transpose(z)));                     // (3, 3)
  const Tensor L = add(sum_of_squares(u), sum(mul(y, y)));                 // ()
  L.backward();
  Values out;
  for (const Tensor& t : {y, u, L, x.grad(), w.grad(), b.grad()}) append(out, t);
  return out;
}

// Single- and multi-head attention, with the weights (composed ops) or without (the fused op,
// OpenMP over batch x heads), forward and backward.
Values attention_workload(uint64_t seed, bool need_weights) {
  Values out;
  for (const int64_t heads : {1, 2, 4}) {
    Rng rng(seed + static_cast<uint64_t>(heads));
    AttentionOptions o;
    o.heads = heads;
    o.window = heads == 2 ? 3 : 0;
    o.rope = heads != 1;
    o.need_weights = need_weights;
    tg::nn::QKVAttention layer(6, 8, 8, o, /*output_proj=*/heads != 1, rng);
    const Tensor X = randn({3, 9, 6}, rng).set_requires_grad();  // (B, T, D)
    const AttentionOutput r = layer.forward(X);
    const Tensor L = attention_loss(r.Y);
    L.backward();
    append(out, r.Y);
    if (need_weights) append(out, r.A);
    append(out, X.grad());
    for (const Tensor& p : layer.parameters()) append(out, p.grad());
  }
  return out;
}

// gradcheck and gradgradcheck of a small multi-head attention (their maxima as the values).
Values gradcheck_workload(uint64_t seed) {
  Rng rng(seed);
  std::vector<Tensor> in = {randn({2, 3, 4}, rng), randn({4, 4}, rng, Dtype::f64, 0.5),
                            randn({4, 4}, rng, Dtype::f64, 0.5),
                            randn({4, 4}, rng, Dtype::f64, 0.5)};
  for (Tensor& t : in) t.set_requires_grad();
  AttentionOptions o;
  o.heads = 2;
  o.need_weights = (seed % 2) == 0;
  const ScalarFunction f = [o](const std::vector<Tensor>& x) {
    return attention_loss(multi_head_attention(x[0], x[1], x[2], x[3], Tensor(), o).Y);
  };
  GradcheckOptions g;
  g.warn_vacuous = false;
  const GradcheckResult r1 = gradcheck(f, in, g);
  g.fast_mode = true;
  const GradcheckResult r2 = gradgradcheck(f, in, g);
  return {r1.passed ? 1.0 : 0.0, r1.max_abs_error, r2.passed ? 1.0 : 0.0, r2.max_abs_error};
}

struct Workload {
  std::string name;
  std::function<Values()> run;
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  for (uint64_t seed : {11, 12}) {
    const std::string s = std::to_string(seed);
    w.push_back({"ops_f64/" + s, [seed] { return ops_workload(seed, Dtype::f64); }});
    w.push_back({"ops_f32/" + s, [seed] { return ops_workload(seed, Dtype::f32); }});
    w.push_back({"attention_weights/" + s, [seed] { return attention_workload(seed, true); }});
    w.push_back({"attention_fused/" + s, [seed] { return attention_workload(seed, false); }});
    w.push_back({"gradcheck/" + s, [seed] { return gradcheck_workload(seed); }});
  }
  return w;
}

// Runs fn(t) on kThreads threads at once (released together) and joins them.
void run_threads(const std::function<void(int)>& fn) {
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      fn(t);
    });
  for (std::thread& th : threads) th.join();
}

// ---- tests -----------------------------------------------------------------------------------

TEST(Threads, IndependentGraphsMatchSingleThreadedReference) {
  const std::vector<Workload> w = workloads();
  std::vector<Values> reference;
  for (const Workload& job : w) {
    SCOPED_TRACE(job.name);
    reference.push_back(job.run());
    ASSERT_FALSE(reference.back().empty());
  }
  for (std::size_t i = 0; i < w.size(); ++i)  // the gradchecks themselves pass
    if (w[i].name.starts_with("gradcheck")) {
      SCOPED_TRACE(w[i].name);
      EXPECT_EQ(reference[i][0], 1.0);
      EXPECT_EQ(reference[i][2], 1.0);
    }

  // failures[t]: what thread t saw differ; each thread runs every workload kRounds times, in an
  // order rotated by t, so different graphs (and the same graph) run at once on several threads.
  std::vector<std::vector<std::string>> failures(kThreads);
  run_threads([&](int t) {
    for (int round = 0; round < kRounds; ++round)
      for (std::size_t k = 0; k < w.size(); ++k) {
        const std::size_t i = (k + static_cast<std::size_t>(t)) % w.size();
        std::string error;
        try {
          if (!same_bits(w[i].run(), reference[i])) error = "differs from the reference";
        } catch (const std::exception& e) {
          error = std::string("threw ") + e.what();
        }
        if (!error.empty())
          failures[t].push_back(w[i].name + " round " + std::to_string(round) + ": " + error);
      }
  });
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_TRUE(failures[t].empty()) << failures[t].size() << " failures, first: "
                                     << (failures[t].empty() ? "" : failures[t][0]);
  }
}

TEST(Threads, NoGradGuardIsThreadLocal) {
  // Thread 0 holds a NoGradGuard while the others record graphs, and the other way round.
  std::barrier sync(kThreads);
  std::vector<std::vector<std::string>> failures(kThreads);
  run_threads([&](int t) {
    auto check = [&](bool cond, const std::string& what) {
      if (!cond) failures[t].push_back(what);
    };
    const Tensor x = ones({2, 2}).set_requires_grad();
    for (int phase = 0; phase < 2; ++phase) {
      const bool guarded = (t == 0) == (phase == 0);
      {
        std::optional<NoGradGuard> guard;
        if (guarded) guard.emplace();
        sync.arrive_and_wait();  // every thread is now in its mode
        for (int i = 0; i < 50; ++i) {
          const Tensor y = mul(x, x);
          check(is_grad_enabled() == !guarded, "grad mode leaked in from another thread");
          check(y.requires_grad() == !guarded && y.is_leaf() == guarded,
                guarded ? "recorded under NoGradGuard" : "did not record with grad mode on");
        }
        sync.arrive_and_wait();  // nobody leaves its mode before all have checked
      }
      check(is_grad_enabled(), "the guard did not restore grad mode");
    }
  });
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_TRUE(failures[t].empty()) << failures[t][0];
  }
}

TEST(Threads, TensorsAndGraphsDieOnAnotherThread) {
  // Producers make tensors and whole graphs, consumers check them, run backward and free them:
  // storage goes back to the freeing thread's cache, nodes are released on that thread.
  constexpr int kItems = 200;
  struct Item {
    Tensor value;  // filled with `tag`
    Tensor x;      // a leaf, and
    Tensor loss;   // a graph from it, made on the producer
    double tag;
  };
  std::mutex mu;
  std::vector<Item> queue;
  std::atomic<int> produced{0};
  std::vector<std::vector<std::string>> failures(kThreads);
  std::vector<AllocatorStats> consumer_stats(kThreads);
  run_threads([&](int t) {
    if (t % 2 == 0) {  // producer
      for (int i = 0; i < kItems; ++i) {
        const double tag = t * 1000 + i;
        const int64_t n = 1 + (i * 37) % 300;  // several size buckets
        Item item{full({n}, tag), full({3, 4}, tag / 1000).set_requires_grad(), Tensor(), tag};
        item.loss = sum_of_squares(softmax(matmul(item.x, transpose(item.x))));
        std::lock_guard lock(mu);
        queue.push_back(std::move(item));
        ++produced;
      }
      empty_cache();
      return;
    }
    int consumed = 0;
    while (consumed < kItems) {  // each consumer takes kItems of the 2 * kItems
      std::vector<Item> mine;
      {
        std::lock_guard lock(mu);
        while (!queue.empty() && consumed + static_cast<int>(mine.size()) < kItems) {
          mine.push_back(std::move(queue.back()));
          queue.pop_back();
        }
      }
      for (Item& item : mine) {
        for (const double v : item.value.to_vector())
          if (v != item.tag) failures[t].push_back("a tensor's data changed on its way");
        item.loss.backward();
        const Tensor g = item.x.grad();
        if (!g.defined() || g.shape() != Shape{3, 4})
          failures[t].push_back("backward on another thread gave no gradient");
      }
      if (mine.empty()) std::this_thread::yield();
      consumed += static_cast<int>(mine.size());
      mine.clear();  // storage and nodes freed here, on the consumer
    }
    // The buffers freed above are now in this thread's cache: fresh tensors reuse them.
    const AllocatorStats before = allocator_stats();
    for (int i = 0; i < 20; ++i) {
      const Tensor a = full({1 + (i * 37) % 300}, 1.0);
      if (a.to_vector() != Values(a.numel(), 1.0)) failures[t].push_back("a reused buffer is bad");
    }
    consumer_stats[t] = allocator_stats();
    consumer_stats[t].cache_hits -= before.cache_hits;
    empty_cache();
  });
  EXPECT_EQ(produced.load(), kItems * kThreads / 2);
  EXPECT_TRUE(queue.empty());
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_TRUE(failures[t].empty()) << failures[t][0];
    if (t % 2 == 1) {
      EXPECT_GT(consumer_stats[t].cache_hits, 0u);
    }
  }
}

TEST(Threads, AllocatorCacheIsPerThread) {
  // A thread that frees a buffer caches it; another thread does not see that cache.
  empty_cache();
  const AllocatorStats main_before = allocator_stats();
  AllocatorStats worker_after_free, worker_after_reuse;
  std::thread worker([&] {
    { const Tensor t = zeros({1000}); }
    worker_after_free = allocator_stats();
    { const Tensor t = zeros({1000}); }
    worker_after_reuse = allocator_stats();
  });
  worker.join();
  EXPECT_GT(worker_after_free.cached_bytes, 0u);
  EXPECT_EQ(worker_after_reuse.cache_hits, worker_after_free.cache_hits + 1);
  const AllocatorStats main_after = allocator_stats();
  EXPECT_EQ(main_after.cached_bytes, main_before.cached_bytes);
  EXPECT_EQ(main_after.cache_hits, main_before.cache_hits);
}

// Y and every gradient of a multi-head attention with the fused op, as one vector.
Values fused_attention_run(int64_t B, int64_t H, int64_t T) {
  Rng rng(2024);
  AttentionOptions o;
  o.heads = H;
  o.need_weights = false;
  o.rope = true;
  tg::nn::QKVAttention layer(16, 32, 32, o, /*output_proj=*/true, rng);
  const Tensor X = randn({B, T, 16}, rng).set_requires_grad();  // (B, T, D)
  const Tensor Y = layer.forward(X).Y;                          // (B, T, d_v)
  attention_loss(Y).backward();
  Values out;
  append(out, Y);
  append(out, X.grad());
  for (const Tensor& p : layer.parameters()) append(out, p.grad());
  return out;
}

// The same layer in forward mode, grad mode off: the fused kernels make O and its tangent in one
// pass (a tangent on X only, so Q, K and V all carry one: the paired products).
Values fused_attention_jvp_run(int64_t B, int64_t H, int64_t T) {
  Rng rng(2025);
  AttentionOptions o;
  o.heads = H;
  o.need_weights = false;
  tg::nn::QKVAttention layer(16, 32, 32, o, /*output_proj=*/true, rng);
  const NoGradGuard off;
  fwad::DualLevel level;
  const Tensor X = fwad::make_dual(randn({B, T, 16}, rng), randn({B, T, 16}, rng));
  const Tensor Y = layer.forward(X).Y;  // (B, T, d_v)
  const fwad::UnpackedDual y = fwad::unpack_dual(Y);
  EXPECT_TRUE(y.tangent.defined());
  Values out;
  append(out, y.primal);
  if (y.tangent.defined()) append(out, y.tangent);
  return out;
}

// A few rows against a large transposed weight (one token through a Linear): BLIS's small-product
// path, which splits the columns between the threads. K stays below Eigen's depth block at
// either thread count (a build without BLIS runs this through Eigen, whose block depth depends
// on the thread count: a deeper K would split the sum differently there).
Values few_rows_matmul_run() {
  Rng rng(78);
  const Tensor x = randn({4, 160}, rng);
  const Tensor w = randn({2304, 160}, rng);
  Values out;
  append(out, matmul(x, w, false, true));  // (4, 2304)
  return out;
}

// matmul large enough for Eigen's OpenMP-parallel GEMM, forward and backward.
Values large_matmul_run() {
  Rng rng(77);
  const Tensor a = randn({192, 160}, rng).set_requires_grad();
  const Tensor b = randn({160, 224}, rng).set_requires_grad();
  const Tensor y = matmul(a, b);  // (192, 224)
  sum_of_squares(y).backward();
  Values out;
  for (const Tensor& t : {y, a.grad(), b.grad()}) append(out, t);
  return out;
}

// conv2d by Winograd's kernels (3 x 3, 32 channels) over 4 images of 42 x 42: two chunks of 2
// images, which run on two threads; dW by the panel kernel over V^T, dX through U^T, both
// prepared before the chunks' threads start.
Values winograd_conv2d_run() {
  Rng rng(78);
  const Tensor x = randn({4, 32, 42, 42}, rng).set_requires_grad();
  const Tensor w = randn({16, 32, 3, 3}, rng).set_requires_grad();
  const Tensor b = randn({16}, rng).set_requires_grad();
  const Tensor y = conv2d(x, w, b);  // (4, 16, 40, 40)
  sum_of_squares(y).backward();
  Values out;
  for (const Tensor& t : {y, x.grad(), w.grad(), b.grad()}) append(out, t);
  return out;
}

// A transformer's MLP at a size whose passes the threads share (ops/threads.h's
// kPassParallelFrom): layer_norm over 700 rows (not a multiple of its 64-row blocks for dW and dB),
// a Linear (in float by the panel product: 200 columns, whole panels and some left over) with its
// bias broadcast, gelu over 140,000 entries (not a multiple of its 512-entry chunks), a product of
// equal shapes; forward and backward, in `dtype`; then clipping to norm 1 and one AdamW step (the
// weight's 25,600 entries and x's 89,600 as parameters: x's norm and update are shared among the
// threads, its norm by 2^15-entry blocks, the last one short).
Values mlp_run(Dtype dtype) {
  Rng rng(79);
  const Tensor x = randn({700, 128}, rng, dtype).set_requires_grad();
  const Tensor g = randn({128}, rng, dtype).set_requires_grad();
  const Tensor beta = randn({128}, rng, dtype).set_requires_grad();
  const Tensor w = randn({200, 128}, rng, dtype, 0.1).set_requires_grad();
  const Tensor b = randn({200}, rng, dtype).set_requires_grad();
  const Tensor m = randn({700, 200}, rng, dtype);
  const Tensor h = add(matmul(layer_norm(x, g, beta), w, false, true), b);  // (700, 200)
  const Tensor y = mul(gelu(h, GeluApproximate::tanh), m);
  sum_of_squares(y).backward();
  Values out;
  for (const Tensor& t : {y, x.grad(), g.grad(), beta.grad(), w.grad(), b.grad()}) append(out, t);
  const NamedTensors params = {{"x", x}, {"w", w}};
  out.push_back(optim::clip_grad_norm(params, 1.0));
  for (const Tensor& t : {x.grad(), w.grad()}) append(out, t);
  optim::AdamW opt(params, optim::AdamWOptions{});
  opt.step();
  for (const Tensor& t : {x, w}) append(out, t);
  return out;
}

// linear (F.linear) over 700 rows into `cols` columns: dY's column sums for db, shared by the
// team in blocks of 64 columns (with 200, the last one 8 wide; with 129, one).
Values linear_run(Dtype dtype, int64_t cols) {
  Rng rng(83);
  const Tensor x = randn({700, 128}, rng, dtype).set_requires_grad();
  const Tensor w = randn({cols, 128}, rng, dtype, 0.1).set_requires_grad();
  const Tensor b = randn({cols}, rng, dtype).set_requires_grad();
  const Tensor m = randn({700, cols}, rng, dtype);
  const Tensor y = linear(x, w, b);
  sum(mul(y, m)).backward();
  Values out;
  for (const Tensor& t : {y, x.grad(), w.grad(), b.grad()}) append(out, t);
  return out;
}

TEST(Threads, LinearBiasGradientOnTwoThreadsIsTheColumnSums) {
  // With dY = m, db is m's column sums: in float, summed in double in row order and rounded once,
  // as a plain loop does here; the team's blocks of columns must give exactly that. 129 columns
  // leave a last block one column wide (a column strided through dY).
  tg::test::ThreadCount two(2);
  for (const int64_t out : {200, 129}) {
    for (const Dtype dtype : {Dtype::f32, Dtype::f64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(out) + " columns");
      Rng rng(89);
      const Tensor x = randn({700, 128}, rng, dtype);
      const Tensor w = randn({out, 128}, rng, dtype, 0.1);
      const Tensor b = randn({out}, rng, dtype).set_requires_grad();
      const Tensor m = randn({700, out}, rng, dtype);
      sum(mul(linear(x, w, b), m)).backward();
      const Tensor db = b.grad().to(Dtype::f64);
      const Tensor m64 = m.to(Dtype::f64);
      const double* pm = m64.data<double>();
      const auto rounded = [&](double s) { return dtype == Dtype::f32 ? double(float(s)) : s; };
      int64_t mismatches = 0, off_by_a_row = 0;
      for (int64_t c = 0; c < out; ++c) {
        double s = 0;
        for (int64_t r = 0; r < 700; ++r) s += pm[r * out + c];
        if (db.at({c}) != rounded(s)) ++mismatches;
        // a negative control: the sum without its last row is not what db holds
        if (db.at({c}) != rounded(s - pm[699 * out + c])) ++off_by_a_row;
      }
      EXPECT_EQ(mismatches, 0);
      EXPECT_EQ(off_by_a_row, out);
    }
  }
}

TEST(Threads, ResultsIdenticalForAnyThreadCount) {
  tg::test::ThreadCount restore;
  struct Case {
    const char* name;
    std::function<Values()> run;
  };
  const std::vector<Case> cases = {
      {"fused_attention_B2_H4_T70", [] { return fused_attention_run(2, 4, 70); }},
      {"fused_attention_jvp_B2_H4_T70", [] { return fused_attention_jvp_run(2, 4, 70); }},
      {"large_matmul", large_matmul_run},
      {"few_rows_matmul", few_rows_matmul_run},
      {"winograd_conv2d", winograd_conv2d_run},
      {"mlp_float", [] { return mlp_run(Dtype::f32); }},
      {"mlp_double", [] { return mlp_run(Dtype::f64); }},
      {"linear_float", [] { return linear_run(Dtype::f32, 200); }},
      {"linear_double", [] { return linear_run(Dtype::f64, 200); }},
      {"linear_float_129", [] { return linear_run(Dtype::f32, 129); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    set_num_threads(1);
    ASSERT_EQ(num_threads(), 1);
    const Values one = c.run();
    set_num_threads(2);
    ASSERT_EQ(num_threads(), 2);
    const Values two = c.run();
    EXPECT_TRUE(same_bits(one, two));
    EXPECT_TRUE(same_bits(two, c.run()));  // and run to run
  }
}

TEST(Threads, FusedAttentionFromSeveralThreadsAtOnce) {
  // Each thread's fused op starts its own OpenMP team (2 threads) while the others run theirs.
  tg::test::ThreadCount restore;
  set_num_threads(2);
  const Values reference = fused_attention_run(2, 4, 70);
  std::vector<int> ok(kThreads, 0);
  run_threads([&](int t) {
    set_num_threads(2);  // the OpenMP thread count is per (initial) thread
    ok[t] = same_bits(fused_attention_run(2, 4, 70), reference);
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ok[t], 1) << "thread " << t;
}

}  // namespace
}  // namespace tg
