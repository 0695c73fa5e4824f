// Memory running out at every allocation of a step, one at a time. malloc and its kin are
// replaced in this program (glibc's own do the work, by their __libc_ names): armed on the thread
// that runs the step, they refuse every call from the N-th on, as memory that has run out does.
// For N = 0, 1, 2, ... until the step runs through without meeting a refusal, the step runs in a
// child process of its own, forked before any tapegrad work (nothing cached yet), which must:
//   - finish, or throw std::bad_alloc (tg::MemoryError, or a plain one from an op's small working
//     lists, as the README says); anything else, a crash or an abort, fails;
//   - after a throw, hold every .grad() as it was before the step;
//   - with memory back, run the same step again to the same numbers, bit for bit, as a child that
//     was never refused (after a refusal the step absorbed, its own numbers are compared).
// Not under the sanitizers (tests/CMakeLists.txt): their runtimes own malloc.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/nn/linear.h>
#include <tapegrad/ops/ops.h>
#include <tapegrad/optim/adamw.h>

extern "C" {
void* __libc_malloc(std::size_t size);
void* __libc_calloc(std::size_t count, std::size_t size);
void* __libc_realloc(void* p, std::size_t size);
void* __libc_memalign(std::size_t alignment, std::size_t size);
}

namespace {

// Calls still allowed on this thread before the refusals begin; negative: not armed. Plain
// thread_locals of this program: reading them allocates nothing.
thread_local long allowed = -1;
thread_local bool met_refusal = false;

bool refuse() {
  if (allowed < 0) return false;
  if (allowed == 0) {
    met_refusal = true;
    return true;
  }
  --allowed;
  return false;
}

}  // namespace

extern "C" {

void* malloc(std::size_t size) noexcept {
  if (refuse()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_malloc(size);
}

void* calloc(std::size_t count, std::size_t size) noexcept {
  if (refuse()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_calloc(count, size);
}

void* realloc(void* p, std::size_t size) noexcept {
  if (size != 0 && refuse()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, size);
}

void* memalign(std::size_t alignment, std::size_t size) noexcept {
  if (refuse()) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  return memalign(alignment, size);
}

int posix_memalign(void** out, std::size_t alignment, std::size_t size) noexcept {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  if (refuse()) return ENOMEM;
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

namespace tg {
namespace {

void append(std::vector<double>& out, const Tensor& t) {
  if (!t.defined()) return out.push_back(-12345.0);  // an undefined gradient shows as a marker
  const Tensor c = t.to(Dtype::f64);  // tensors are contiguous
  out.insert(out.end(), c.data<double>(), c.data<double>() + c.numel());
}

// A step: `prepare` makes its inputs and `numbers` reads its results (memory as usual), `step`
// runs under the refusals, `untouched` says whether every .grad() is as prepare left it. `exact`:
// after a throw, running the step again gives the reference's numbers (not so for a step whose
// update may have been cut off halfway, an optimizer's over its parameters).
struct Scenario {
  std::function<void()> prepare;
  std::function<void()> step;
  std::function<std::vector<double>()> numbers;
  std::function<bool()> untouched;
  bool exact = true;
};

// How the child ended: 0 ran through, no refusal met; the others below; a signal is a crash.
enum Outcome {
  kRanThrough = 0,
  kMemoryError = 10,
  kPlainBadAlloc = 11,
  kAbsorbed = 12,
  kNumbersDiffer = 20,
  kOtherException = 21,
  kGradsTouched = 22,
};

int run_child(const Scenario& s, long n, const std::vector<double>& reference) {
  s.prepare();
  std::vector<double> got;
  int outcome = kRanThrough;
  allowed = n;
  met_refusal = false;
  try {
    s.step();
    allowed = -1;
    got = s.numbers();
    if (met_refusal) outcome = kAbsorbed;
  } catch (const MemoryError&) {
    allowed = -1;
    outcome = kMemoryError;
  } catch (const std::bad_alloc&) {
    allowed = -1;
    outcome = kPlainBadAlloc;
  } catch (...) {
    allowed = -1;
    return kOtherException;
  }
  if (outcome == kMemoryError || outcome == kPlainBadAlloc) {
    if (!s.untouched()) return kGradsTouched;
    s.step();  // memory is back
    got = s.numbers();
    if (!s.exact) return outcome;
  }
  return got == reference ? outcome : kNumbersDiffer;
}

// The reference numbers: the step in a child that was never refused, sent back through a pipe.
std::vector<double> reference_of(const Scenario& s) {
  int fds[2];
  if (::pipe(fds) != 0) ADD_FAILURE() << "pipe: " << std::strerror(errno);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    s.prepare();
    s.step();
    const std::vector<double> v = s.numbers();
    const std::size_t bytes = v.size() * sizeof(double);
    const bool sent = ::write(fds[1], &bytes, sizeof bytes) == sizeof bytes &&
                      ::write(fds[1], v.data(), bytes) == static_cast<ssize_t>(bytes);
    std::_Exit(sent ? 0 : 1);
  }
  ::close(fds[1]);
  std::size_t bytes = 0;
  std::vector<double> v;
  if (::read(fds[0], &bytes, sizeof bytes) == sizeof bytes) {
    v.resize(bytes / sizeof(double));
    std::size_t done = 0;
    char* to = reinterpret_cast<char*>(v.data());
    while (done < bytes) {
      const ssize_t r = ::read(fds[0], to + done, bytes - done);
      if (r <= 0) break;
      done += static_cast<std::size_t>(r);
    }
    if (done != bytes) v.clear();
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return v;
}

struct Tally {
  long points = 0;  // refusal points tried (the calls the step makes)
  long memory_errors = 0, plain_bad_allocs = 0, absorbed = 0;
  std::vector<std::string> failures;  // "N: what went wrong"
};

Tally refuse_each_allocation(const Scenario& s, long max_points = 20000) {
  Tally t;
  const std::vector<double> reference = reference_of(s);
  if (reference.empty()) {
    t.failures.push_back("the reference run (no refusal) failed");
    return t;
  }
  for (long n = 0; n < max_points; ++n) {
    const pid_t pid = ::fork();
    if (pid == 0) std::_Exit(run_child(s, n, reference));
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      t.failures.push_back(std::to_string(n) + ": killed by signal " +
                           std::to_string(WTERMSIG(status)));
      continue;
    }
    switch (WEXITSTATUS(status)) {
      case kRanThrough: t.points = n; return t;
      case kMemoryError: ++t.memory_errors; break;
      case kPlainBadAlloc: ++t.plain_bad_allocs; break;
      case kAbsorbed: ++t.absorbed; break;
      case kNumbersDiffer: t.failures.push_back(std::to_string(n) + ": numbers differ"); break;
      case kOtherException: t.failures.push_back(std::to_string(n) + ": not a bad_alloc"); break;
      case kGradsTouched: t.failures.push_back(std::to_string(n) + ": a .grad() changed"); break;
      default:
        t.failures.push_back(std::to_string(n) + ": exit " + std::to_string(WEXITSTATUS(status)));
    }
  }
  t.failures.push_back("still meeting refusals after " + std::to_string(max_points) + " calls");
  return t;
}

std::string report(const Tally& t) {
  std::string s = std::to_string(t.points) + " points: " + std::to_string(t.memory_errors) +
                  " MemoryError, " + std::to_string(t.plain_bad_allocs) + " plain bad_alloc, " +
                  std::to_string(t.absorbed) + " absorbed";
  for (std::size_t i = 0; i < t.failures.size() && i < 10; ++i) s += "\n  " + t.failures[i];
  return s;
}

// Inputs that live across prepare and step (each child has its own copy).
struct Inputs {
  Tensor x, w, r, v;
};
Inputs& inputs() {
  static Inputs in;
  return in;
}

void prepare_chain() {
  Rng rng(7);
  Inputs& in = inputs();
  in.x = randn({3, 4}, rng).set_requires_grad();
  in.w = scale(randn({4, 4}, rng), 0.5).detach().set_requires_grad();
  in.r = randn({3, 4}, rng);  // the loss's fixed random weights
  in.v = randn({3, 4}, rng);
}

bool no_grads() { return !inputs().x.grad().defined() && !inputs().w.grad().defined(); }

// Matmuls, tanh, softmax and a layer norm, 12 layers deep, then a backward into x and w.
Tensor chain_loss() {
  const Inputs& in = inputs();
  Tensor y = in.x;
  for (int k = 0; k < 4; ++k) {
    y = tanh(matmul(y, in.w));
    y = softmax(add(y, scale(y, 0.5)), -1);
    y = layer_norm(y, Tensor(), Tensor());
  }
  return sum(mul(y, in.r));
}

// The numbers of the chain's step: the loss and every leaf's gradient.
struct ChainResult {
  Tensor out;
};
ChainResult& chain_result() {
  static ChainResult r;
  return r;
}
std::vector<double> chain_numbers() {
  std::vector<double> out;
  append(out, chain_result().out);
  append(out, inputs().x.grad());
  append(out, inputs().w.grad());
  return out;
}

Scenario chain_backward() {
  return {prepare_chain,
          [] {
            const Tensor loss = chain_loss();
            loss.backward();
            chain_result().out = loss;
          },
          chain_numbers, no_grads};
}

// A gradient with create_graph, then the backward of a product with it (a Hessian-vector
// product) into x and w.
Scenario double_backward() {
  return {prepare_chain,
          [] {
            const Inputs& in = inputs();
            const std::vector<Tensor> g = grad({chain_loss()}, {in.x}, {}, true);
            const Tensor hv = sum(mul(g[0], in.v));
            hv.backward();
            chain_result().out = hv;
          },
          chain_numbers, no_grads};
}

// Two Linear layers, relu and cross-entropy, then AdamW's step.
struct Mlp {
  std::unique_ptr<nn::Linear> l1, l2;
  std::unique_ptr<optim::AdamW> opt;
  Tensor x, targets;
};
Mlp& mlp() {
  static Mlp m;
  return m;
}

Scenario train_step() {
  return {[] {
            Rng rng(3);
            Mlp& m = mlp();
            m.l1 = std::make_unique<nn::Linear>(6, 16, true, rng);
            m.l2 = std::make_unique<nn::Linear>(16, 4, true, rng);
            m.opt = std::make_unique<optim::AdamW>(
                NamedTensors{{"l1.weight", m.l1->weight}, {"l1.bias", m.l1->bias},
                             {"l2.weight", m.l2->weight}, {"l2.bias", m.l2->bias}},
                1e-2);
            m.x = randn({8, 6}, rng);
            m.targets = randint(0, 4, {8}, rng);
          },
          [] {
            Mlp& m = mlp();
            m.opt->zero_grad();
            const Tensor loss =
                cross_entropy(m.l2->forward(relu(m.l1->forward(m.x))), m.targets);
            loss.backward();
            m.opt->step();
          },
          [] {
            const Mlp& m = mlp();
            std::vector<double> out;
            for (const Tensor& p : {m.l1->weight, m.l1->bias, m.l2->weight, m.l2->bias})
              append(out, p);
            return out;
          },
          [] { return true; },  // zero_grad left them undefined; a cut-off step may fill some
          false};
}

// Refuses each allocation of the step in turn: every point survived, and the step met at least
// min_points of them (it allocates; the refusals were met).
Tally refuse_each_and_expect_survival(const Scenario& s, long min_points) {
  const Tally t = refuse_each_allocation(s);
  std::printf("%s\n", report(t).c_str());
  EXPECT_TRUE(t.failures.empty()) << report(t);
  EXPECT_GT(t.points, min_points) << report(t);
  return t;
}

TEST(AllocRefusal, EveryAllocationOfABackwardRefusedInTurn) {
  const Tally t = refuse_each_and_expect_survival(chain_backward(), 100);
  EXPECT_GT(t.memory_errors, t.points / 2) << report(t);
}

TEST(AllocRefusal, EveryAllocationOfADoubleBackwardRefusedInTurn) {
  const Tally t = refuse_each_and_expect_survival(double_backward(), 100);
  EXPECT_GT(t.memory_errors, t.points / 2) << report(t);
}

TEST(AllocRefusal, EveryAllocationOfATrainStepRefusedInTurn) {
  refuse_each_and_expect_survival(train_step(), 40);  // 45 here: Linear's bias fused, fewer strings
}

// The negative controls: the harness sees an abort (an allocation in a noexcept function), a
// gradient written before the refusal, and numbers that differ after one.
TEST(AllocRefusal, TheHarnessSeesAnAbortATouchedGradAndDifferentNumbers) {
  Scenario aborts = chain_backward();
  aborts.step = [] {
    const auto grow = []() noexcept { return std::vector<double>(64, 1.0).size(); };
    if (grow() == 64) chain_backward().step();
  };
  const Tally a = refuse_each_allocation(aborts);
  ASSERT_FALSE(a.failures.empty());
  EXPECT_EQ(a.failures[0], "0: killed by signal " + std::to_string(SIGABRT)) << report(a);

  Scenario touches = chain_backward();
  touches.step = [] {
    inputs().x.set_grad(ones({3, 4}));
    chain_backward().step();
  };
  const Tally b = refuse_each_allocation(touches);
  EXPECT_NE(report(b).find("a .grad() changed"), std::string::npos) << report(b);

  static int steps = 0;  // per child: the numbers of a run after a refused one are off by one
  Scenario differs = chain_backward();
  differs.step = [] {
    ++steps;
    chain_backward().step();
  };
  differs.numbers = [] {
    std::vector<double> out = chain_numbers();
    out[0] += steps - 1;
    return out;
  };
  const Tally c = refuse_each_allocation(differs);
  EXPECT_NE(report(c).find("numbers differ"), std::string::npos) << report(c);
}

}  // namespace
}  // namespace tg
