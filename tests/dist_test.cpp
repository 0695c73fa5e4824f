// dist/: the one-process communicator, and the collectives' users (average_gradients,
// broadcast_parameters, agree_on_failure) run on N threads acting as N ranks, so every rule is
// tested without MPI (tests/dist_mpi_test.cpp runs the same problem under mpirun).

#include <gtest/gtest.h>

#include <barrier>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <tapegrad/dist/communicator.h>
#include <tapegrad/dist/data_parallel.h>
#include "dist_util.h"
#include "thread_ranks.h"
#include <tapegrad/optim/sgd.h>
#include "test_util.h"

namespace tg::dist {
namespace {

using dist_test::Batch;
using dist_test::kB;
using dist_test::Net;
using dist_test::run_ranks;

void expect_near_rel(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(got.defined());
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], w[i], rel * std::max(1.0, std::abs(w[i]))) << "element " << i;
}

TEST(LocalCommunicator, IsOneRankWithIdentityCollectives) {
  LocalCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_STREQ(comm.name(), "local");
  std::vector<double> d = {1.5, -2.0};
  std::vector<float> f = {3.0f};
  comm.allreduce_sum(d.data(), 2);
  comm.allreduce_sum(f.data(), 1);
  EXPECT_EQ(d, (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(f, (std::vector<float>{3.0f}));
  Tensor t = from_vector({1, 2, 3}, {3});
  const uint64_t v0 = t.version();
  comm.allreduce_mean(t);
  comm.broadcast(t, 0);
  EXPECT_EQ(t.to_vector(), (std::vector<double>{1, 2, 3}));
  EXPECT_GT(t.version(), v0);  // a collective is a write as far as a saved graph knows
  Tensor idx = from_indices({4, 5}, {2});
  comm.broadcast(idx, 0);  // any dtype broadcasts
  EXPECT_EQ(idx.to_vector(), (std::vector<double>{4, 5}));
  comm.barrier();
}

TEST(LocalCommunicator, BadArgumentsThrowValueError) {
  LocalCommunicator comm;
  Tensor t = zeros({2});
  Tensor idx = from_indices({1}, {1});
  Tensor undefined;
  double x = 0;
  const struct {
    const char* name;
    std::function<void()> call;
    const char* fragment;
  } rows[] = {
      {"root out of range", [&] { comm.broadcast(t, 1); }, "root 1 is not a rank of 1"},
      {"negative root", [&] { comm.broadcast_bytes(&x, 8, -1); }, "root -1"},
      {"negative count", [&] { comm.allreduce_sum(&x, -1); }, "negative count -1"},
      {"null data", [&] { comm.allreduce_sum(static_cast<float*>(nullptr), 2); }, "null data"},
      {"undefined tensor", [&] { comm.allreduce_sum(undefined); }, "undefined"},
      {"int64 allreduce", [&] { comm.allreduce_mean(idx); }, "float32 or float64"},
      {"int64 parameter", [&] { average_gradients({idx}, comm); }, "not a float tensor"},
      {"bad broadcast root", [&] { broadcast_parameters({t}, comm, 2); }, "root 2"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    test::expect_throws<ValueError>(row.call, {row.fragment});
  }
}

TEST(MakeCommunicator, IsLocalWithoutALauncher) {
  if (launched_by_mpi()) GTEST_SKIP() << "running under an MPI launcher";
  auto comm = make_communicator();
  EXPECT_STREQ(comm->name(), "local");
  EXPECT_EQ(comm->size(), 1);
}

// N copies of a program built without MPI would each believe they are alone and write the same
// files: make_communicator refuses.
TEST(MakeCommunicator, RefusesAnMpiLaunchWithoutMpi) {
  if (built_with_mpi() || launched_by_mpi()) GTEST_SKIP() << "needs a build without MPI";
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  test::expect_throws<ValueError>([] { make_communicator(); }, {"built without MPI"});
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
}

TEST(AgreeOnFailure, OneRankPassesOrThrowsRankError) {
  LocalCommunicator comm;
  agree_on_failure(comm, nullptr);
  run_agreed(comm, [] {});
  try {
    run_agreed(comm, [] { throw ValueError("bad flag --x"); }, 2);
    ADD_FAILURE() << "no throw";
  } catch (const RankError& e) {
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.status(), 2);
    EXPECT_EQ(e.message(), "bad flag --x");
    EXPECT_STREQ(e.what(), "rank 0: bad flag --x");
  }
}

TEST(AgreeOnFailure, LowestFailingRankSpeaksForEveryRank) {
  std::vector<std::string> seen(3);
  run_ranks(3, [&](Communicator& comm) {
    try {
      run_agreed(comm, [&] {
        if (comm.rank() >= 1) throw IoError("cannot read shard " + std::to_string(comm.rank()));
      }, 1);
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const RankError& e) {
      seen[comm.rank()] = std::string(e.what()) + " status " + std::to_string(e.status());
    }
    run_agreed(comm, [] {});  // the ranks are still in step afterwards
  });
  for (const std::string& s : seen) EXPECT_EQ(s, "rank 1: cannot read shard 1 status 1");
}

TEST(AverageGradients, OneRankLeavesGradientsAsTheyAre) {
  Net net(1);
  const Batch batch = dist_test::make_batch(7);
  dist_test::slice_loss(net, batch, 0, kB).backward();
  const Tensor before = net.fc.weight.grad().clone();
  LocalCommunicator comm;
  average_gradients(net, comm);
  EXPECT_EQ(net.fc.weight.grad().to_vector(), before.to_vector());
  EXPECT_FALSE(net.unused.grad().defined());
}

// Each rank's slice of the batch, averaged, gives the gradient of the whole batch.
TEST(AverageGradients, SlicesAveragedEqualTheWholeBatch) {
  const Batch batch = dist_test::make_batch(7);
  Net whole(1);
  dist_test::slice_loss(whole, batch, 0, kB).backward();
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    run_ranks(n, [&](Communicator& comm) {
      Net net(1);
      const int64_t rows = kB / n;
      dist_test::slice_loss(net, batch, comm.rank() * rows, rows).backward();
      average_gradients(net, comm);
      expect_near_rel(net.fc.weight.grad(), whole.fc.weight.grad(), 1e-12, "fc.weight");
      expect_near_rel(net.fc.bias.grad(), whole.fc.bias.grad(), 1e-12, "fc.bias");
      EXPECT_FALSE(net.unused.grad().defined());  // no rank had one: it stays without
    });
  }
}

// Rank r's gradients are r + 1 (a), only rank 1 has one for b, nobody for c; d is float32.
TEST(AverageGradients, MissingGradientsCountAsZerosAndKeptHandlesKeepTheirValues) {
  run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank();
    Tensor a = zeros({2, 2}).set_requires_grad(), b = zeros({3}).set_requires_grad();
    Tensor c = zeros({1}).set_requires_grad(), d = zeros({2}, Dtype::f32).set_requires_grad();
    a.set_grad(full({2, 2}, r + 1.0));
    if (r == 1) b.set_grad(full({3}, 3.0));
    d.set_grad(full({2}, 2.0 * r, Dtype::f32));
    const Tensor kept = r == 0 ? a.grad() : Tensor();  // the user holds rank 0's handle
    const TensorImpl* a_grad = a.impl().grad.get();  // not a handle: that would share it
    const uint64_t version = a.grad().version();
    average_gradients({a, b, c, d}, comm);
    EXPECT_EQ(a.grad().to_vector(), std::vector<double>(4, 2.0));  // (1 + 2 + 3) / 3
    EXPECT_EQ(b.grad().to_vector(), std::vector<double>(3, 1.0));  // (0 + 3 + 0) / 3
    EXPECT_FALSE(c.grad().defined());
    EXPECT_EQ(d.grad().dtype(), Dtype::f32);
    EXPECT_EQ(d.grad().to_vector(), std::vector<double>(2, 2.0));  // (0 + 2 + 4) / 3
    if (r == 0) {
      EXPECT_EQ(kept.to_vector(), std::vector<double>(4, 1.0));  // replaced, not overwritten
      EXPECT_NE(a.impl().grad.get(), a_grad);
    } else {
      EXPECT_EQ(a.impl().grad.get(), a_grad);  // nobody else saw it: averaged in place
      EXPECT_GT(a.grad().version(), version);
    }
  });
}

TEST(AverageGradients, BucketsSplitALargeParameter) {
  const int64_t n = kBucketElements + 5;
  run_ranks(2, [&](Communicator& comm) {
    Tensor big = zeros({n}).set_requires_grad(), small = zeros({3}).set_requires_grad();
    Tensor g = zeros({n});
    double* gd = g.data<double>();
    for (int64_t i = 0; i < n; ++i) gd[i] = comm.rank() == 0 ? double(i) : -0.5 * double(i);
    big.set_grad(g);
    small.set_grad(full({3}, comm.rank() == 0 ? 4.0 : 8.0));
    average_gradients({small, big}, comm);  // small fills part of the first bucket
    const double* mean = std::as_const(big).grad().data<double>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += mean[i] != 0.25 * double(i);
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(small.grad().to_vector(), std::vector<double>(3, 6.0));
  });
}

TEST(BroadcastParameters, EveryReplicaTakesRankZerosValues) {
  const Net reference(100);
  run_ranks(2, [&](Communicator& comm) {
    Net net(100 + comm.rank());  // rank 1 starts elsewhere
    broadcast_parameters(net, comm);
    const NamedTensors want = reference.named_parameters(), got = net.named_parameters();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << got[i].first;
  });
}

TEST(BroadcastParameters, ADifferentLayoutThrowsRankErrorOnEveryRank) {
  run_ranks(2, [&](Communicator& comm) {
    Tensor p = zeros({comm.rank() == 0 ? 3 : 4});
    try {
      broadcast_parameters({p}, comm);
      ADD_FAILURE() << "rank " << comm.rank() << " did not throw";
    } catch (const RankError& e) {
      EXPECT_EQ(e.rank(), 1);
      EXPECT_NE(std::string(e.what()).find("parameter 0 is (4,) float64 here, (3,) float64 on rank 0"),
                std::string::npos)
          << e.what();
    }
  });
}

// Three SGD steps on two ranks follow three steps in one process.
TEST(DataParallel, TrainingOnTwoRanksFollowsOneProcess) {
  const Batch batch = dist_test::make_batch(11);
  Net whole(3);
  optim::SGD whole_opt(whole.named_parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    whole.zero_grad();
    dist_test::slice_loss(whole, batch, 0, kB).backward();
    whole_opt.step();
  }
  run_ranks(2, [&](Communicator& comm) {
    Net net(3 + comm.rank());
    broadcast_parameters(net, comm);
    optim::SGD opt(net.named_parameters(), 0.1);
    const int64_t rows = kB / comm.size();
    for (int step = 0; step < 3; ++step) {
      net.zero_grad();
      dist_test::slice_loss(net, batch, comm.rank() * rows, rows).backward();
      average_gradients(net, comm);
      opt.step();
    }
    expect_near_rel(net.fc.weight, whole.fc.weight, 1e-12, "fc.weight");
    expect_near_rel(net.fc.bias, whole.fc.bias, 1e-12, "fc.bias");
  });
}

}  // namespace
}  // namespace tg::dist
