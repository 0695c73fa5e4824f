// The thread count follows the cores other processes leave free (ops/threads.h): the decision,
// the /proc/stat parser, and the whole loop against real busy processes.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/ops/threads.h>

namespace {

using tg::detail::team_for;

TEST(Threads, TeamIsOnePerCoreOthersLeaveFree) {
  struct Row {
    int wanted, cores;
    double others;
    int team;
  };
  const std::vector<Row> rows = {
      {2, 2, 0.0, 2},  {2, 2, 0.05, 2}, {2, 2, 0.2, 2},  // an idle machine's noise
      {2, 2, 0.3, 1},  {2, 2, 0.67, 1},                  // a busy process's share beside our 2
      {2, 2, 1.0, 1},  {2, 2, 2.0, 1},  {2, 2, 5.0, 1},  // never fewer than one
      {1, 2, 0.0, 1},  {8, 2, 0.0, 2},                   // never more than asked, or than cores
      {64, 64, 10.0, 54}, {16, 64, 10.0, 16}, {4, 4, -0.1, 4},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::to_string(r.wanted) + " wanted, " + std::to_string(r.cores) + " cores, " +
                 std::to_string(r.others) + " busy");
    EXPECT_EQ(team_for(r.wanted, r.cores, r.others), r.team);
  }
}

TEST(Threads, BusySecondsCountsTheAllowedCpusOnly) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks
  const std::string stat =
      "cpu  1000 0 500 9000 0 0 0 0 0 0\n"
      "cpu0 100 10 50 4000 7 1 2 3 0 0\n"
      "cpu1 900 0 400 5000 0 0 0 0 40 0\n"
      "intr 12345 0 0\n";
  EXPECT_DOUBLE_EQ(tg::detail::busy_seconds(stat, {true, false}, 100), 1.66);
  EXPECT_DOUBLE_EQ(tg::detail::busy_seconds(stat, {false, true}, 100), 13.0);
  EXPECT_DOUBLE_EQ(tg::detail::busy_seconds(stat, {true, true}, 100), 14.66);
  EXPECT_EQ(tg::detail::busy_seconds(stat, {false, false, true}, 100), -1);
  EXPECT_EQ(tg::detail::busy_seconds("cpu  1 2 3 4 5 6 7 8\n", {true, true}, 100), -1);
  EXPECT_EQ(tg::detail::busy_seconds("", {true}, 100), -1);
}

// Starts one spinning process per allowed core; kills them on scope exit.
class BusyProcesses {
 public:
  BusyProcesses() {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
    for (int k = 0; k < n; ++k) {
      const pid_t pid = fork();
      if (pid == 0) {
        for (;;) __asm__ volatile("");  // spins (an empty asm counts as a side effect)
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BusyProcesses() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  size_t size() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

// The team within a second and a half of every core being taken by another process.
int team_after_load() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  int team = tg::detail::team_size();
  while (team > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    team = tg::detail::team_size();
  }
  return team;
}

TEST(Threads, BusyMachineShrinksTheTeamToOne) {
  const int saved = tg::num_threads();
  tg::set_num_threads(2);
  ASSERT_TRUE(tg::thread_adaptation());  // the default
  // The first call makes a first guess from the threads running now; the load below comes
  // after it, so what shrinks the team is the measurement over the following interval.
  tg::detail::team_size();
  {
    BusyProcesses busy;
    ASSERT_GE(busy.size(), 1u);
    EXPECT_EQ(team_after_load(), 1);
    // Off, the team is what was asked for, busy or not (the negative control).
    tg::set_thread_adaptation(false);
    EXPECT_EQ(tg::detail::team_size(), 2);
    tg::set_thread_adaptation(true);
  }
  tg::set_num_threads(saved);
}

TEST(Threads, OneThreadAskedIsOneThread) {
  const int saved = tg::num_threads();
  tg::set_num_threads(1);
  EXPECT_EQ(tg::detail::team_size(), 1);
  tg::set_thread_adaptation(false);
  EXPECT_EQ(tg::detail::team_size(), 1);
  tg::set_thread_adaptation(true);
  tg::set_num_threads(saved);
}

}  // namespace
