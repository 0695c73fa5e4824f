// No growth: a steady forward + backward loop of a small multi-head attention layer stops asking
// the OS for memory once warm. After warm-up (1,000 iterations) the caching allocator serves
// every buffer from its cache (os_allocations stays put) and the resident set stays within
// 1 MiB up to iteration 10,000; every iteration computes bit-identical loss and gradients, so
// reused buffers never leak values from one iteration into the next. Both paths: the composed
// ops (need_weights = true) and the fused kernel (false). Varying T from one iteration to the
// next (a cycle of lengths) must settle just the same once each length has been seen.
// The long loops pin one thread: where the fused kernel starts an OpenMP team per call, a team
// start on busy CI cores costs 1-20 ms (15 s or more for 10,000 iterations instead of 1 s);
// 100 iterations on two threads cover the threaded configuration. Release, 2 busy cores: ~2 s
// for the single-thread loops, up to ~3 s for the two-thread one.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/attention.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;
using tg::test::rss_bytes;

#if defined(TG_ASAN)
constexpr bool kAsan = true;  // RSS is the sanitizer's business; fewer iterations, same checks
constexpr int kScale = 5;
#else
constexpr bool kAsan = false;
constexpr int kScale = 1;
#endif

// The loss and every gradient of one iteration, flattened.
std::vector<double> snapshot(const Tensor& loss, const std::vector<Tensor>& leaves) {
  std::vector<double> v{loss.item()};
  for (const Tensor& t : leaves) {
    const std::vector<double> g = t.grad().to_vector();
    v.insert(v.end(), g.begin(), g.end());
  }
  return v;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct Run {
  int iterations, warmup;
  std::size_t os_at_warmup = 0, os_at_end = 0, rss_at_warmup = 0, rss_at_end = 0;
  int changed_iterations = 0;  // iterations whose loss or gradients differ from the first
};

// `iterations` of forward + backward of QKVAttention (B = 2, D = 8, d_k = d_v = 8, H = 2,
// with W_O) on X of T = lengths[i % lengths.size()] positions, on `threads` threads.
Run train_loop(bool need_weights, const std::vector<int64_t>& lengths, int iterations, int warmup,
               int threads) {
  const int prev_threads = tg::num_threads();
  tg::set_num_threads(threads);
  tg::AttentionOptions o;
  o.heads = 2;
  o.need_weights = need_weights;
  tg::Rng rng(42);
  const tg::nn::QKVAttention layer(8, 8, 8, o, /*output_proj=*/true, rng);
  std::vector<Tensor> xs, leaves = layer.parameters();
  for (int64_t T : lengths) xs.push_back(tg::randn({2, T, 8}, rng).set_requires_grad());
  std::vector<std::vector<double>> first(lengths.size());
  Run r{iterations / kScale, warmup / kScale};
  for (int i = 0; i < r.iterations; ++i) {
    const std::size_t k = i % lengths.size();
    const Tensor& X = xs[k];
    for (const Tensor& t : leaves) t.zero_grad();
    X.zero_grad();
    const tg::AttentionOutput out = layer.forward(X);
    const Tensor loss = tg::attention_loss(out.Y);
    loss.backward();
    if (i % 97 == 0 || i < static_cast<int>(lengths.size())) {  // spot checks, cheap
      std::vector<Tensor> all = leaves;
      all.push_back(X);
      const std::vector<double> s = snapshot(loss, all);
      if (first[k].empty()) first[k] = s;
      r.changed_iterations += !same_bits(s, first[k]);
    }
    if (i + 1 == r.warmup) {
      r.os_at_warmup = tg::allocator_stats().os_allocations;
      r.rss_at_warmup = rss_bytes();
    }
  }
  r.os_at_end = tg::allocator_stats().os_allocations;
  r.rss_at_end = rss_bytes();
  tg::set_num_threads(prev_threads);
  return r;
}

void expect_flat(const Run& r) {
  EXPECT_EQ(r.changed_iterations, 0) << "loss or gradients changed between iterations";
  EXPECT_EQ(r.os_at_end, r.os_at_warmup) << "the allocator asks the OS for buffers after warm-up";
  if (kAsan) return;
  EXPECT_LT(r.rss_at_end, r.rss_at_warmup + (std::size_t{1} << 20))
      << "resident memory grew by " << (double(r.rss_at_end) - double(r.rss_at_warmup)) / 1024
      << " KiB between iteration " << r.warmup << " and " << r.iterations;
}

TEST(Memory, AttentionTrainingLoopStaysFlat) {
  for (bool need_weights : {true, false}) {
    SCOPED_TRACE(need_weights ? "composed (need_weights)" : "fused");
    expect_flat(train_loop(need_weights, {8}, 10000, 1000, 1));
  }
  SCOPED_TRACE("fused, two threads");
  expect_flat(train_loop(false, {8}, 100, 30, 2));
}

// Sequences of different lengths, one after another, as a data loader hands them out.
TEST(Memory, VaryingSequenceLengthsSettle) {
  for (bool need_weights : {true, false}) {
    SCOPED_TRACE(need_weights ? "composed (need_weights)" : "fused");
    expect_flat(train_loop(need_weights, {8, 3, 1, 6, 8, 5}, 3000, 600, 1));
  }
}

// The allocator hands back what it caches: after empty_cache() nothing is cached, and a warm
// loop afterwards fills the cache again from the OS only up to what one iteration needs.
TEST(Memory, EmptyCacheReleasesAndTheLoopRewarms) {
  tg::AttentionOptions o;
  o.heads = 2;
  tg::Rng rng(7);
  const tg::nn::QKVAttention layer(8, 8, 8, o, true, rng);
  const Tensor X = tg::randn({2, 8, 8}, rng).set_requires_grad();
  auto step = [&] { tg::attention_loss(layer.forward(X).Y).backward(); };
  for (int i = 0; i < 10; ++i) step();
  EXPECT_GT(tg::allocator_stats().cached_bytes, 0u);
  tg::empty_cache();
  EXPECT_EQ(tg::allocator_stats().cached_bytes, 0u);
  step();
  const std::size_t os_after_one = tg::allocator_stats().os_allocations;
  for (int i = 0; i < 100; ++i) step();
  EXPECT_EQ(tg::allocator_stats().os_allocations, os_after_one);
}

// Each bucket size has its own place in the cache: buffers of 43 sizes, one per bucket from 64
// bytes to 256 KiB, freed together and asked for again, each come back to the
// size they had (a place shared by two sizes would hand one size's buffer to the other), and none
// from the OS.
TEST(Memory, EachBucketSizeGetsItsOwnBufferBack) {
  std::vector<int64_t> floats;  // bucket sizes in bytes / 4: 64, 128, 256, then 4 per power of 2
  for (int64_t b : {64, 128, 256}) floats.push_back(b / 4);
  for (int hi = 8; hi < 18; ++hi)
    for (int64_t k = 5; k <= 8; ++k) floats.push_back((k << (hi - 2)) / 4);
  ASSERT_EQ(floats.size(), 43u);
  tg::empty_cache();  // (so that the cache's cap on its bytes cannot empty it halfway)
  std::vector<const void*> first;
  std::vector<Tensor> ts;
  for (int64_t n : floats) ts.push_back(tg::zeros({n}, tg::Dtype::f32));
  for (const Tensor& t : ts) first.push_back(t.data<float>());
  for (Tensor& t : ts) t = Tensor();  // freed smallest first
  const tg::AllocatorStats before = tg::allocator_stats();
  std::vector<Tensor> again(floats.size());
  // Asked for smallest first too: a place shared by the sizes, the last freed on top, would hand
  // the largest size's buffer to the smallest (in the reverse order it would pass).
  for (std::size_t i = 0; i < floats.size(); ++i)
    again[i] = tg::zeros({floats[i]}, tg::Dtype::f32);
  for (std::size_t i = 0; i < floats.size(); ++i)
    EXPECT_EQ(static_cast<const void*>(again[i].data<float>()), first[i])
        << "the buffer of " << floats[i] * 4 << " bytes";
  EXPECT_EQ(tg::allocator_stats().os_allocations, before.os_allocations);
  EXPECT_EQ(tg::allocator_stats().cache_hits, before.cache_hits + floats.size());
}

#if defined(TG_ASAN)
// Under ASan the cache hides nothing: the bucket's slack past the asked bytes and a buffer
// waiting in the cache are poisoned, so an overrun or a use after free is reported as if the
// buffer came straight from malloc.
TEST(MemoryDeathTest, AsanSeesAWriteOnePastTheEnd) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Tensor t = tg::zeros({3}, tg::Dtype::f32);  // 12 bytes of a 64-byte bucket
        t.data<float>()[3] = 1.0f;
      },
      "AddressSanitizer");
}

TEST(MemoryDeathTest, AsanSeesAReadOfAFreedTensor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const float* p = nullptr;
        {
          const Tensor t = tg::ones({64}, tg::Dtype::f32);
          p = t.data<float>();
        }  // t's buffer goes back to the cache
        volatile float v = p[0];
        (void)v;
      },
      "AddressSanitizer");
}

TEST(MemoryDeathTest, AsanSeesAnOverrunOfAReusedBuffer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        { const Tensor warm = tg::zeros({64}, tg::Dtype::f64); }  // 512 bytes into the cache
        Tensor t = tg::zeros({63}, tg::Dtype::f64);  // the same bucket, handed out again
        t.data<double>()[63] = 1.0;
      },
      "AddressSanitizer");
}
#endif

}  // namespace
