// dist::GradientReducer on N threads acting as N ranks: the means are average_gradients's, bit
// for bit; buckets start during the backward, before it commits any .grad(); an error on one rank
// in the middle of a pass leaves the ranks in step (tests/dist_mpi_test.cpp runs it under MPI).

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/data_parallel.h>
#include <tapegrad/dist/reducer.h>
#include "dist_util.h"
#include <tapegrad/autograd/node.h>
#include <tapegrad/nn/gpt.h>
#include "nn_util.h"
#include "test_util.h"
#include "thread_ranks.h"

namespace tg::dist {
namespace {

using dist_test::Batch;
using dist_test::kB;
using dist_test::Net;
using dist_test::run_ranks;
using dist_test::ThreadCommunicator;

std::vector<std::vector<double>> grads_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<double>> out;
  for (const Tensor& p : params)
    out.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<double>{});
  return out;
}

// The parameters with `unused` first: reversed into buckets, it comes last and holds back none.
std::vector<Tensor> unused_first(const Net& net) {
  return {net.unused, net.fc.weight, net.fc.bias};
}

// After a failed pass, the next one on the same reducer gives average_gradients's means.
void expect_a_normal_pass(Net& net, GradientReducer& reducer, Communicator& comm,
                          const Batch& batch) {
  Net want(1);
  net.zero_grad();
  auto pass = reducer.begin();
  dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
  pass.finish();
  dist_test::slice_loss(want, batch, comm.rank() * 6, 6).backward();
  average_gradients(want, comm);
  EXPECT_EQ(grads_of(unused_first(net)), grads_of(unused_first(want)));
}

// One bucket per parameter (1 byte: every parameter is larger), or all in one.
TEST(GradientReducer, MeansAreAverageGradientsBitForBit) {
  const Batch batch = dist_test::make_batch(7);
  for (int64_t bucket_bytes : {int64_t{1}, kDefaultBucketBytes}) {
    SCOPED_TRACE("bucket_bytes " + std::to_string(bucket_bytes));
    run_ranks(2, [&](Communicator& comm) {
      const int64_t rows = kB / comm.size();
      Net want(1), got(1);
      dist_test::slice_loss(want, batch, comm.rank() * rows, rows).backward();
      average_gradients(want, comm);

      GradientReducer reducer(unused_first(got), comm, bucket_bytes);
      EXPECT_EQ(reducer.buckets(), bucket_bytes == 1 ? 3 : 1);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass reuses the buckets
        got.zero_grad();
        auto p = reducer.begin();
        dist_test::slice_loss(got, batch, comm.rank() * rows, rows).backward();
        p.finish();
        EXPECT_EQ(grads_of(unused_first(got)), grads_of(unused_first(want)));
        EXPECT_FALSE(got.unused.grad().defined());  // no rank has one: it keeps none
      }
      // Negative control: without the reducer each rank keeps its own slice's gradient.
      Net alone(1);
      dist_test::slice_loss(alone, batch, comm.rank() * rows, rows).backward();
      EXPECT_NE(alone.fc.weight.grad().to_vector(), want.fc.weight.grad().to_vector());
    });
  }
}

// Every bucket whose parameters the backward reaches starts before the backward commits a single
// .grad() (the engine commits at the end of the pass): the allreduces overlap the backward.
TEST(GradientReducer, BucketsStartWhileTheBackwardRuns) {
  const Batch batch = dist_test::make_batch(7);
  run_ranks(2, [&](Communicator& comm) {
    auto& threads = dynamic_cast<ThreadCommunicator&>(comm);
    Net net(1);
    int starts = 0, starts_after_commit = 0;
    threads.on_start = [&] {
      ++starts;
      starts_after_commit += net.fc.weight.grad().defined() || net.fc.bias.grad().defined();
    };
    GradientReducer reducer(unused_first(net), comm, 1);
    auto pass = reducer.begin();
    dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
    EXPECT_EQ(starts, 2);  // fc.bias's and fc.weight's buckets; `unused` waits for finish()
    EXPECT_EQ(starts_after_commit, 0);
    pass.finish();
    EXPECT_EQ(starts, 3);
    EXPECT_EQ(reducer.overlapped(), 2);
    // A parameter the backward never reaches holds back its bucket and those after it: listed
    // last, `unused` is in the first bucket, so nothing starts before finish() (the means are the
    // same, only later).
    GradientReducer held_back({net.fc.weight, net.fc.bias, net.unused}, comm, 1);
    net.zero_grad();
    starts = 0;
    auto second = held_back.begin();
    dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
    EXPECT_EQ(starts, 0);
    second.finish();
    EXPECT_EQ(held_back.overlapped(), 0);
  });
}

// nanoGPT's model, whose tied wte is ready only at the very end of the backward.
TEST(GradientReducer, TinyGptOnTwoRanksEqualsAverageGradients) {
  nn::GPTConfig config = test::tiny();
  config.dtype = Dtype::f64;
  std::vector<int64_t> ids, next;
  for (int64_t i = 0; i < 4 * config.block_size; ++i) {
    ids.push_back((7 * i + 3) % config.vocab_size);
    next.push_back((5 * i + 1) % config.vocab_size);
  }
  const Tensor idx = test::tokens(ids, 4, config.block_size);
  const Tensor targets = test::tokens(next, 4, config.block_size);
  run_ranks(2, [&](Communicator& comm) {
    Rng init_a(9), init_b(9);
    nn::GPT want(config, init_a), got(config, init_b);
    const Tensor x = narrow(idx, 0, 2 * comm.rank(), 2), y = narrow(targets, 0, 2 * comm.rank(), 2);
    want.loss(x, y).backward();
    average_gradients(want, comm);
    GradientReducer reducer(got, comm, 256);
    ASSERT_GT(reducer.buckets(), 2);
    auto pass = reducer.begin();
    got.loss(x, y).backward();
    pass.finish();
    EXPECT_EQ(grads_of(got.parameters()), grads_of(want.parameters()));
    EXPECT_EQ(reducer.overlapped(), reducer.buckets());  // every parameter is reached
  });
}

// Rank 1 fails in the forward, before its backward: its pass still makes every collective, so
// run_agreed reaches both ranks with rank 1's message, and the next pass is a normal one.
TEST(GradientReducer, AnErrorOnOneRankMidPassKeepsTheRanksInStep) {
  const Batch batch = dist_test::make_batch(7);
  std::vector<std::string> seen(2);
  run_ranks(2, [&](Communicator& comm) {
    Net net(1);
    GradientReducer reducer(unused_first(net), comm, 1);
    try {
      run_agreed(comm, [&] {
        auto pass = reducer.begin();
        if (comm.rank() == 1) throw IoError("cannot read shard 1");
        dist_test::slice_loss(net, batch, 0, 6).backward();
        pass.finish();
      });
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const RankError& e) {
      seen[static_cast<size_t>(comm.rank())] = e.what();
    }
    if (comm.rank() == 1) {
      EXPECT_FALSE(net.fc.weight.grad().defined());  // its pass wrote nothing
    }
    expect_a_normal_pass(net, reducer, comm, batch);
  });
  EXPECT_EQ(seen[0], "rank 1: cannot read shard 1");
  EXPECT_EQ(seen[1], "rank 1: cannot read shard 1");
}

// Rank 1 fails inside its backward, after its first bucket has started (fc.bias is complete
// before the throwing node's backward runs): the ranks still make the same collectives.
TEST(GradientReducer, AnErrorMidBackwardAfterABucketStartedKeepsTheRanksInStep) {
  const Batch batch = dist_test::make_batch(7);
  run_ranks(2, [&](Communicator& comm) {
    Net net(1);
    GradientReducer reducer(unused_first(net), comm, 1);
    try {
      run_agreed(comm, [&] {
        auto pass = reducer.begin();
        Tensor L = dist_test::slice_loss(net, batch, comm.rank() * 6, 6);
        if (comm.rank() == 1) {
          const Tensor boom = record("boom", net.fc.weight.detach().clone(), {net.fc.weight})
                                  .formula([](const Tensor&) -> Grads { throw IoError("boom"); });
          L = add(L, sum(boom));
        }
        L.backward();
        pass.finish();
      });
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const RankError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("rank 1: boom (in the backward of 'boom'", 0), 0u)
          << e.what();
    }
    expect_a_normal_pass(net, reducer, comm, batch);
  });
}

// Rank 1 has nothing to backpropagate: it counts as zeros, the mean is rank 0's gradient / 2.
TEST(GradientReducer, ARankWithoutBackwardCountsAsZeros) {
  const Batch batch = dist_test::make_batch(7);
  Net alone(1);
  dist_test::slice_loss(alone, batch, 0, 6).backward();
  run_ranks(2, [&](Communicator& comm) {
    Net net(1);
    GradientReducer reducer(net, comm, 1);
    auto pass = reducer.begin();
    if (comm.rank() == 0) dist_test::slice_loss(net, batch, 0, 6).backward();
    pass.finish();
    const std::vector<double> half = scale(alone.fc.weight.grad(), 0.5).to_vector();
    EXPECT_EQ(net.fc.weight.grad().to_vector(), half);
    EXPECT_FALSE(net.unused.grad().defined());
  });
}

// A .grad() handle the caller holds keeps its values: the mean goes to a new gradient.
TEST(GradientReducer, AHeldGradientHandleKeepsItsValues) {
  const Batch batch = dist_test::make_batch(7);
  run_ranks(2, [&](Communicator& comm) {
    Net net(1), want(1);
    GradientReducer reducer(net, comm, 1);
    dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
    const Tensor handle = net.fc.weight.grad();
    const std::vector<double> before = handle.to_vector();
    auto pass = reducer.begin();
    dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
    pass.finish();
    EXPECT_EQ(handle.to_vector(), before);
    for (int k = 0; k < 2; ++k) dist_test::slice_loss(want, batch, comm.rank() * 6, 6).backward();
    average_gradients(want, comm);
    EXPECT_EQ(net.fc.weight.grad().to_vector(), want.fc.weight.grad().to_vector());
  });
}

TEST(GradientReducer, ASecondBackwardInOnePassIsRefusedOnEveryRank) {
  const Batch batch = dist_test::make_batch(7);
  run_ranks(2, [&](Communicator& comm) {
    Net net(1);
    GradientReducer reducer(unused_first(net), comm, 1);
    try {
      run_agreed(comm, [&] {
        auto pass = reducer.begin();
        dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
        dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
        pass.finish();
      });
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const RankError& e) {
      EXPECT_NE(std::string(e.what()).find("second backward in one pass"), std::string::npos)
          << e.what();
    }
  });
}

// Earlier micro-batches accumulated into .grad() outside a pass count: the pass adds its own.
TEST(GradientReducer, GradientsAccumulatedBeforeThePassAreIncluded) {
  const Batch batch = dist_test::make_batch(7);
  run_ranks(2, [&](Communicator& comm) {
    Net net(1), want(1);
    for (Net* n : {&net, &want}) dist_test::slice_loss(*n, batch, comm.rank() * 6, 3).backward();
    dist_test::slice_loss(want, batch, comm.rank() * 6 + 3, 3).backward();
    average_gradients(want, comm);
    GradientReducer reducer(unused_first(net), comm, 1);
    auto pass = reducer.begin();
    dist_test::slice_loss(net, batch, comm.rank() * 6 + 3, 3).backward();
    pass.finish();
    EXPECT_EQ(grads_of(unused_first(net)), grads_of(unused_first(want)));
  });
}

TEST(GradientReducer, OneProcessLeavesGradientsAsTheyAre) {
  LocalCommunicator comm;
  Net net(1);
  GradientReducer reducer(net, comm);
  auto pass = reducer.begin();
  dist_test::slice_loss(net, dist_test::make_batch(7), 0, kB).backward();
  const std::vector<double> before = net.fc.weight.grad().to_vector();
  pass.finish();
  EXPECT_EQ(net.fc.weight.grad().to_vector(), before);
  EXPECT_EQ(reducer.overlapped(), 0);
}

TEST(GradientReducer, BadArgumentsThrowValueError) {
  LocalCommunicator comm;
  Net net(1);
  const Tensor ints = from_indices({1, 2}, {2});
  test::expect_throws<ValueError>([&] { GradientReducer({Tensor()}, comm); },
                                  {"GradientReducer", "parameter 0 is undefined"});
  test::expect_throws<ValueError>([&] { GradientReducer({net.fc.bias, ints}, comm); },
                                  {"parameter 1 is (2,) int64, not a float tensor"});
  test::expect_throws<ValueError>([&] { GradientReducer({net.fc.bias, net.fc.bias}, comm); },
                                  {"parameter 1 (", "listed twice"});
  test::expect_throws<ValueError>([&] { GradientReducer(net, comm, 0); },
                                  {"bucket_bytes must be at least 1, got 0"});
  GradientReducer reducer(net, comm);
  auto pass = reducer.begin();
  test::expect_throws<ValueError>([&] { reducer.begin(); }, {"while a pass is open"});
  pass.finish();
  test::expect_throws<ValueError>([&] { pass.finish(); }, {"has ended"});
}

}  // namespace
}  // namespace tg::dist
