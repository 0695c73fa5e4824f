#include <tapegrad/ops/threads.h>

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

#include <tapegrad/autograd/error.h>

namespace tg {

namespace {

std::atomic<bool> adapt{true};

// How often the free cores are measured: long enough for /proc/stat's 100 Hz ticks to add up
// to a steady figure, short enough that a load that comes or goes is followed within a step or two.
constexpr auto kInterval = std::chrono::milliseconds(200);

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The CPUs this thread may run on; empty when the system does not say.
std::vector<bool> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {};
  std::vector<bool> cpus(CPU_SETSIZE);
  for (int k = 0; k < CPU_SETSIZE; ++k) cpus[k] = CPU_ISSET(k, &set);
  return cpus;
}

// The per-CPU lines at the top of /proc/stat ("cpu ..." then "cpu0 ...", "cpu1 ...").
std::string read_cpu_lines() {
  std::string text;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return text;
  char line[512];
  while (std::fgets(line, sizeof line, f) && std::string_view(line).starts_with("cpu"))
    text += line;
  std::fclose(f);
  return text;
}

// Threads running on the whole system now, from /proc/loadavg's "running/total" field, less the
// caller: the first guess, before a measurement interval has passed. 0 when unknown.
double others_running_now() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return 0;
  double l1, l5, l15;
  int running = 0, total = 0;
  const int got = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total);
  std::fclose(f);
  return got == 5 ? std::max(0, running - 1) : 0;
}

// The free cores, measured over the last interval: the busy time of the allowed CPUs less this
// process's own CPU time is what other processes took.
class FreeCores {
 public:
  // The cores others left free, or INT_MAX where the system does not tell.
  int get() {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (now >= next_.load(std::memory_order_relaxed)) update();
    return free_.load(std::memory_order_relaxed);
  }

 private:
  struct Sample {
    double wall = 0, busy = -1, ours = 0;
    int cores = 0;
  };

  static Sample take() {
    Sample s;
    s.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
                 .count();
    s.ours = process_cpu_seconds();
    const std::vector<bool> cpus = allowed_cpus();
    s.cores = static_cast<int>(std::count(cpus.begin(), cpus.end(), true));
    static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    if (s.cores > 0 && ticks > 0) s.busy = detail::busy_seconds(read_cpu_lines(), cpus, ticks);
    return s;
  }

  void update() {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is measuring; its figure serves everyone
    const Sample now = take();
    int free = INT_MAX;
    if (now.busy >= 0) {
      const double dt = now.wall - last_.wall;
      const double others = last_.busy >= 0 && dt > 0
                                ? ((now.busy - last_.busy) - (now.ours - last_.ours)) / dt
                                : others_running_now();
      free = detail::team_for(INT_MAX, now.cores, others);
    }
    last_ = now;
    free_.store(free, std::memory_order_relaxed);
    const auto next = std::chrono::steady_clock::now() + kInterval;
    next_.store(now.busy >= 0 ? next.time_since_epoch().count() : INT64_MAX,
                std::memory_order_relaxed);
  }

  std::mutex mutex_;
  Sample last_;
  std::atomic<int> free_{INT_MAX};
  std::atomic<int64_t> next_{0};
};

FreeCores& free_cores() {
  static FreeCores f;
  return f;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: needs at least 1 thread, got " + std::to_string(n));
  omp_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

void set_thread_adaptation(bool on) { adapt.store(on); }

bool thread_adaptation() { return adapt.load(); }

namespace detail {

int team_size() {
  const int wanted = omp_get_max_threads();
  if (wanted == 1 || !adapt.load(std::memory_order_relaxed)) return wanted;
  return std::min(wanted, free_cores().get());
}

void for_parts(int64_t n, PartsBody body, int64_t serial_below) {
  const int team = n < serial_below ? 1 : team_size();
  if (team == 1) {
    if (n > 0) body.call(body.f, 0, n);
    return;
  }
#pragma omp parallel num_threads(team)
  {
    const int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    body.call(body.f, n * t / k, n * (t + 1) / k);
  }
}

int team_for(int wanted, int cores, double others_busy) {
  const double free = cores - std::max(0.0, others_busy);
  const double n = std::floor(free + 0.25);
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(std::max(1, wanted))));
}

double busy_seconds(std::string_view text, const std::vector<bool>& cpus, double ticks_per_s) {
  double ticks = 0;
  bool any = false;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string line(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
    // "cpuN ..." lines only ("cpu  ..." is the total over all CPUs)
    if (!line.starts_with("cpu") || !std::isdigit(static_cast<unsigned char>(line[3]))) continue;
    unsigned cpu = 0;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal = 0;
    const int got = std::sscanf(line.c_str(), "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu",
                                &cpu, &user, &nice, &system, &idle, &iowait, &irq, &softirq,
                                &steal);
    if (got < 8 || cpu >= cpus.size() || !cpus[cpu]) continue;
    ticks += static_cast<double>(user + nice + system + irq + softirq + steal);
    any = true;
  }
  return any ? ticks / ticks_per_s : -1;
}

}  // namespace detail

}  // namespace tg
