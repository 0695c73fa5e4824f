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

#include "dist/communicator.h"
#include "dist/data_parallel.h"
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
