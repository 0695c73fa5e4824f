// dist/ under MPI: run by ctest as `mpirun -np 2 dist_mpi_test` (tests/CMakeLists.txt). Every
// rank runs every test in the same order, since each test makes collective calls. Each rank's
// gradients of its slice of a batch, averaged, equal the one-process gradient of the whole batch;
// broadcast_parameters makes a different init equal to rank 0's. Rank 1's output is silenced.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/data_parallel.h>
#include <tapegrad/dist/reducer.h>
#include "dist_util.h"

namespace tg::dist {
namespace {

using dist_test::Batch;
using dist_test::kB;
using dist_test::Net;

Communicator* g_comm = nullptr;

// Max over elements of |got - want| / max(1, |want|).
double max_rel_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  double worst = g.size() == w.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(g.size(), w.size()); ++i)
    worst = std::max(worst, std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i])));
  return worst;
}

TEST(MpiCommunicator, IsLaunchedWithTwoRanks) {
  EXPECT_STREQ(g_comm->name(), "mpi");
  EXPECT_EQ(g_comm->size(), 2);
}

TEST(MpiCommunicator, AllreduceAndBroadcastTensors) {
  Communicator& comm = *g_comm;
  const double r = comm.rank();
  Tensor d = from_vector({r, 10 * r + 1}, {2});
  comm.allreduce_sum(d);
  EXPECT_EQ(d.to_vector(), (std::vector<double>{1, 12}));  // ranks 0 and 1
  Tensor f = from_vector({2 * r}, {1}, Dtype::f32);
  comm.allreduce_mean(f);
  EXPECT_EQ(f.to_vector(), (std::vector<double>{1}));
  Tensor b = from_vector({r + 5, r + 6}, {2});
  comm.broadcast(b, 1);
  EXPECT_EQ(b.to_vector(), (std::vector<double>{6, 7}));
  comm.barrier();
}

TEST(AverageGradients, SlicesAveragedEqualTheWholeBatch) {
  Communicator& comm = *g_comm;
  const Batch batch = dist_test::make_batch(7);  // the same global batch on every rank
  Net whole(1);
  dist_test::slice_loss(whole, batch, 0, kB).backward();

  Net net(1);
  const int64_t rows = kB / comm.size();
  dist_test::slice_loss(net, batch, comm.rank() * rows, rows).backward();
  average_gradients(net, comm);
  EXPECT_LE(max_rel_error(net.fc.weight.grad(), whole.fc.weight.grad()), 1e-12);
  EXPECT_LE(max_rel_error(net.fc.bias.grad(), whole.fc.bias.grad()), 1e-12);
  EXPECT_FALSE(net.unused.grad().defined());
}

TEST(AverageGradients, AGradientOnOneRankOnlyCountsZerosElsewhere) {
  Communicator& comm = *g_comm;
  Tensor p = zeros({3}).set_requires_grad();
  if (comm.rank() == 1) p.set_grad(full({3}, 4.0));
  average_gradients({p}, comm);
  EXPECT_EQ(p.grad().to_vector(), std::vector<double>(3, 2.0));
}

TEST(BroadcastParameters, RankOnesInitBecomesRankZeros) {
  Communicator& comm = *g_comm;
  const Net reference(100);
  Net net(100 + comm.rank());
  if (comm.rank() == 1) {
    EXPECT_NE(net.fc.weight.to_vector(), reference.fc.weight.to_vector());
  }
  broadcast_parameters(net, comm);
  const NamedTensors want = reference.named_parameters(), got = net.named_parameters();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << got[i].first;
}

TEST(MpiCommunicator, NonblockingAllreduceSums) {
  Communicator& comm = *g_comm;
  std::vector<float> f = {1.0f + comm.rank(), 2.0f};
  std::vector<double> d = {10.0 * comm.rank()};
  auto a = comm.start_allreduce_sum(f.data(), 2);
  auto b = comm.start_allreduce_sum(d.data(), 1);
  b->wait();
  a->wait();
  EXPECT_TRUE(a->test());
  EXPECT_EQ(f, (std::vector<float>{3.0f, 4.0f}));
  EXPECT_EQ(d, (std::vector<double>{10.0}));
}

// The overlapped averaging gives average_gradients's values, bit for bit; the buckets of the
// parameters the backward reaches start during it.
TEST(GradientReducer, OverlappedMeansAreAverageGradientsBitForBit) {
  Communicator& comm = *g_comm;
  const Batch batch = dist_test::make_batch(7);
  const int64_t rows = kB / comm.size();
  Net want(1), got(1);
  dist_test::slice_loss(want, batch, comm.rank() * rows, rows).backward();
  average_gradients(want, comm);
  GradientReducer reducer({got.unused, got.fc.weight, got.fc.bias}, comm, 1);
  for (int pass = 0; pass < 2; ++pass) {
    got.zero_grad();
    auto p = reducer.begin();
    dist_test::slice_loss(got, batch, comm.rank() * rows, rows).backward();
    p.finish();
    EXPECT_EQ(got.fc.weight.grad().to_vector(), want.fc.weight.grad().to_vector());
    EXPECT_EQ(got.fc.bias.grad().to_vector(), want.fc.bias.grad().to_vector());
    EXPECT_FALSE(got.unused.grad().defined());
    EXPECT_EQ(reducer.overlapped(), 2);
  }
}

// Rank 1 fails before its backward; its pass still completes the allreduces rank 0 started, so
// both reach agree_on_failure, and the next pass is a normal one.
TEST(GradientReducer, AnErrorOnRankOneMidPassKeepsTheRanksInStep) {
  Communicator& comm = *g_comm;
  const Batch batch = dist_test::make_batch(7);
  Net net(1);
  GradientReducer reducer(net, comm, 1);
  try {
    run_agreed(comm, [&] {
      auto pass = reducer.begin();
      if (comm.rank() == 1) throw ValueError("no batch here");
      dist_test::slice_loss(net, batch, 0, 6).backward();
      pass.finish();
    });
    ADD_FAILURE() << "no throw";
  } catch (const RankError& e) {
    EXPECT_STREQ(e.what(), "rank 1: no batch here");
  }
  net.zero_grad();
  auto pass = reducer.begin();
  dist_test::slice_loss(net, batch, comm.rank() * 6, 6).backward();
  pass.finish();
  Net want(1);
  dist_test::slice_loss(want, batch, comm.rank() * 6, 6).backward();
  average_gradients(want, comm);
  EXPECT_EQ(net.fc.weight.grad().to_vector(), want.fc.weight.grad().to_vector());
}

TEST(AgreeOnFailure, RankOnesErrorReachesRankZero) {
  Communicator& comm = *g_comm;
  try {
    run_agreed(comm, [&] {
      if (comm.rank() == 1) throw ValueError("rank one's own trouble");
    }, 2);
    ADD_FAILURE() << "no throw";
  } catch (const RankError& e) {
    EXPECT_STREQ(e.what(), "rank 1: rank one's own trouble");
    EXPECT_EQ(e.status(), 2);
  }
}

}  // namespace
}  // namespace tg::dist

int main(int argc, char** argv) {
  auto comm = tg::dist::make_communicator(&argc, &argv);
  tg::dist::g_comm = comm.get();
  ::testing::InitGoogleTest(&argc, argv);
  if (comm->rank() != 0) {  // one report: rank 1's failures still set its exit status
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  // Both ranks' results decide: a failure on either makes both exit nonzero.
  double failures = failed ? 1 : 0;
  comm->allreduce_sum(&failures, 1);
  return failures > 0 ? 1 : 0;
}
