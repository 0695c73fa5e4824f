#pragma once
// N ranks as N threads of one process, for testing dist/ without MPI: ThreadCommunicator and
// run_ranks (tests/dist_test.cpp, tests/reducer_test.cpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/dist/communicator.h>

namespace tg::dist_test {

using dist::Communicator;
using dist::PendingCollective;

// Ranks as threads of one process: each collective publishes this rank's buffer, waits for all,
// then reads the others'. Sums go in rank order, as a reduction tree would for two ranks.
struct Group {
  explicit Group(int n) : size(n), sync(n), buffers(n), counts(n) {}
  int size;
  std::barrier<> sync;
  std::vector<void*> buffers;
  std::vector<int64_t> counts;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(Group& group, int rank) : group_(group), rank_(rank) {}
  std::function<void()> on_start;  // called as each nonblocking allreduce starts
  int rank() const override { return rank_; }
  int size() const override { return group_.size; }
  const char* name() const override { return "threads"; }
  void barrier() override { group_.sync.arrive_and_wait(); }
  [[noreturn]] void abort(const std::string& message, int) override {
    throw std::logic_error("abort: " + message);
  }

 protected:
  void do_allreduce_sum(double* data, int64_t count) override { sum(data, count); }
  void do_allreduce_sum(float* data, int64_t count) override { sum(data, count); }
  // Nonblocking starts run the blocking sum at once (the base class's way), after on_start.
  std::unique_ptr<PendingCollective> do_start_allreduce_sum(double* data, int64_t count) override {
    if (on_start) on_start();
    return Communicator::do_start_allreduce_sum(data, count);
  }
  std::unique_ptr<PendingCollective> do_start_allreduce_sum(float* data, int64_t count) override {
    if (on_start) on_start();
    return Communicator::do_start_allreduce_sum(data, count);
  }
  void do_broadcast(void* bytes, int64_t count, int root) override {
    publish(bytes, count);
    if (rank_ != root && count > 0) std::memcpy(bytes, group_.buffers[root], count);
    group_.sync.arrive_and_wait();  // nobody reuses root's buffer before every copy is done
  }

 private:
  void publish(void* data, int64_t count) {
    group_.buffers[rank_] = data;
    group_.counts[rank_] = count;
    group_.sync.arrive_and_wait();
    for (int r = 0; r < group_.size; ++r)
      if (group_.counts[r] != count) throw std::logic_error("ranks disagree on a count");
  }
  template <class T>
  void sum(T* data, int64_t count) {
    publish(data, count);
    std::vector<T> total(static_cast<size_t>(count), T(0));
    for (int r = 0; r < group_.size; ++r) {
      const T* other = static_cast<const T*>(group_.buffers[r]);
      for (int64_t i = 0; i < count; ++i) total[i] += other[i];
    }
    group_.sync.arrive_and_wait();  // every rank has read every buffer
    std::copy(total.begin(), total.end(), data);
  }

  Group& group_;
  int rank_;
};

// Runs body(comm) on n threads, one rank each.
void run_ranks(int n, const std::function<void(Communicator&)>& body) {
  Group group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        body(comm);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw: " << e.what();
      }
    });
  for (std::thread& t : threads) t.join();
}

}  // namespace tg::dist_test
