// optim/ against torch.optim: SGD and AdamW training loops (nanoGPT's: the schedule, clipping,
// the step) run here and by tests/optim_reference.py on the same .npy inputs; float64 agrees to
// 1e-12 relative, float32 to 1e-6, and the schedule to nanoGPT's get_lr. Without python3 and
// torch the suite skips, or fails when the environment variable CI is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/optim/optim.h>
#include "optim_util.h"
#include "test_util.h"

namespace tg::optim {
namespace {

namespace fs = std::filesystem;

const fs::path kReference = TAPEGRAD_OPTIM_REFERENCE_PY;

using tg::test::sci;
using tg::test::TempDir;
using test_util::leaves;
using test_util::make_problem;
using test_util::Problem;

// ---- one training loop, here and in torch ---------------------------------------------------

struct TrainingRun {
  std::string name, optimizer;  // "adamw" or "sgd"
  Dtype dtype;
  double lr, lr_min;
  int64_t warmup;
  double beta1, beta2, eps, weight_decay, momentum;
  int decay_rank_min;
  double max_norm;  // 0: no clipping
};

std::unique_ptr<Optimizer> make_optimizer(const TrainingRun& r, const NamedTensors& params) {
  if (r.optimizer == "adamw")
    return std::make_unique<AdamW>(
        params, AdamWOptions{r.lr, r.beta1, r.beta2, r.eps, r.weight_decay, r.decay_rank_min});
  return std::make_unique<SGD>(params,
                               SgdOptions{r.lr, r.momentum, r.weight_decay, r.decay_rank_min});
}

struct RunResult {
  NamedTensors params, state;
  std::vector<double> norms;
};

// nanoGPT's loop: the rate of update s, the gradients, clipping, the step.
RunResult train(const TrainingRun& r, const Problem& pr) {
  RunResult out;
  out.params = leaves(pr.params, r.dtype);
  const auto opt = make_optimizer(r, out.params);
  const int64_t steps = static_cast<int64_t>(pr.grads.size());
  for (int64_t s = 0; s < steps; ++s) {
    opt->set_lr(get_lr(s, r.lr, r.lr_min, r.warmup, steps));
    for (std::size_t i = 0; i < out.params.size(); ++i)
      out.params[i].second.set_grad(pr.grads[s][i].to(r.dtype));
    if (r.max_norm > 0) out.norms.push_back(clip_grad_norm(out.params, r.max_norm));
    opt->step();
  }
  out.state = opt->state_dict();
  return out;
}

const std::vector<TrainingRun>& runs() {
  static const std::vector<TrainingRun> r = {
      {"adamw", "adamw", Dtype::f64, 1e-2, 1e-3, 3, 0.9, 0.99, 1e-8, 0.1, 0, 2, 1.0},
      {"adamw_one_group_defaults", "adamw", Dtype::f64, 1e-3, 1e-3, 0, 0.9, 0.999, 1e-8, 1e-2, 0,
       0, 0.0},
      {"sgd_momentum", "sgd", Dtype::f64, 0.1, 0.01, 2, 0, 0, 0, 0.1, 0.9, 2, 1.0},
      {"sgd_plain_one_group", "sgd", Dtype::f64, 0.05, 0.05, 0, 0, 0, 0, 0.05, 0, 0, 0.0},
      {"adamw_f32", "adamw", Dtype::f32, 1e-2, 1e-3, 3, 0.9, 0.99, 1e-8, 0.1, 0, 2, 1.0},
      {"sgd_momentum_f32", "sgd", Dtype::f32, 0.1, 0.01, 2, 0, 0, 0, 0.1, 0.9, 2, 1.0},
  };
  return r;
}

// {lr, lr_min, warmup, steps}: nanoGPT's recipe, constant, and spans of 0 and below.
const std::vector<std::vector<double>>& schedules() {
  static const std::vector<std::vector<double>> s = {
      {1e-3, 1e-4, 100, 2000}, {6e-4, 6e-5, 10, 50}, {1e-3, 1e-3, 0, 20},
      {1e-2, 1e-3, 5, 6},      {1e-2, 1e-3, 5, 3},   {1e-2, 0, 0, 1}};
  return s;
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

void write_reference_inputs(const Problem& pr, const fs::path& dir) {
  for (const auto& [name, p] : pr.params) write_npy((dir / ("param." + name + ".npy")).string(), p);
  for (std::size_t s = 0; s < pr.grads.size(); ++s)
    for (std::size_t i = 0; i < pr.params.size(); ++i)
      write_npy((dir / ("grad." + std::to_string(s) + "." + pr.params[i].first + ".npy")).string(),
                pr.grads[s][i]);
  std::ostringstream js;
  js << "{\"steps\": " << pr.grads.size() << ", \"names\": [";
  for (std::size_t i = 0; i < pr.params.size(); ++i)
    js << (i ? ", " : "") << '"' << pr.params[i].first << '"';
  js << "], \"runs\": [";
  for (std::size_t k = 0; k < runs().size(); ++k) {
    const TrainingRun& r = runs()[k];
    js << (k ? ", " : "") << "{\"name\": \"" << r.name << "\", \"optimizer\": \"" << r.optimizer
       << "\", \"dtype\": \"" << (r.dtype == Dtype::f32 ? "f32" : "f64") << "\", \"lr\": "
       << num(r.lr) << ", \"lr_min\": " << num(r.lr_min) << ", \"warmup\": " << r.warmup
       << ", \"beta1\": " << num(r.beta1) << ", \"beta2\": " << num(r.beta2)
       << ", \"eps\": " << num(r.eps) << ", \"weight_decay\": " << num(r.weight_decay)
       << ", \"momentum\": " << num(r.momentum) << ", \"decay_rank_min\": " << r.decay_rank_min
       << ", \"max_norm\": " << num(r.max_norm) << "}";
  }
  js << "], \"schedules\": [";
  for (std::size_t k = 0; k < schedules().size(); ++k) {
    const auto& s = schedules()[k];
    js << (k ? ", " : "") << "[" << num(s[0]) << ", " << num(s[1]) << ", "
       << static_cast<int64_t>(s[2]) << ", " << static_cast<int64_t>(s[3]) << "]";
  }
  js << "]}";
  std::ofstream(dir / "config.json") << js.str();
}

// max |a - b| / max |b|, after the shapes agree (infinity when they do not, or on a NaN).
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double d = std::fabs(a[k] - b[k]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs(b[k]));
  }
  return scale > 0 ? diff / scale : diff;
}

// The reference run, once for all tests (python3 with torch and numpy is there).
struct Reference {
  TempDir dir;
  Problem problem = make_problem(10, 2024);
  std::string failure;  // the script's output when it failed
};

const Reference& reference() {
  static const std::unique_ptr<Reference> ref = [] {
    auto r = std::make_unique<Reference>();
    write_reference_inputs(r->problem, r->dir.path());
    const std::string log = (r->dir / "log").string();
    const std::string cmd = test::kPython + " '" + kReference.string() + "' '" +
                            r->dir.path().string() + "' >'" + log + "' 2>&1";
    if (std::system(cmd.c_str()) != 0) r->failure = test::slurp(log);
    return r;
  }();
  return *ref;
}

class TorchReference : public ::testing::Test {
 protected:
  void SetUp() override {
    TG_REQUIRE_PYTHON("torch, numpy");
    ASSERT_EQ(reference().failure, "") << "optim_reference.py failed";
  }
  std::vector<double> expected(const std::string& file) const {
    return read_npy((reference().dir / "ref" / file).string()).to_vector();
  }
};

TEST_F(TorchReference, TrainingLoopsMatchTorchOptim) {
  for (const TrainingRun& r : runs()) {
    SCOPED_TRACE(r.name);
    const double tol = r.dtype == Dtype::f32 ? 1e-6 : 1e-12;
    const RunResult got = train(r, reference().problem);
    double worst = 0;
    auto compare = [&](const std::vector<double>& ours, const std::string& file) {
      const double rel = rel_diff(ours, expected(file));
      EXPECT_LE(rel, tol) << file;
      worst = std::max(worst, rel);
    };
    for (const auto& [name, p] : got.params)
      compare(p.to_vector(), r.name + ".param." + name + ".npy");
    ASSERT_EQ(got.state.front().first, "optim.step");
    EXPECT_EQ(got.state.front().second.item(), 10.0);
    for (std::size_t k = 1; k < got.state.size(); ++k)  // "optim.m.NAME": file "RUN.m.NAME.npy"
      compare(got.state[k].second.to_vector(), r.name + got.state[k].first.substr(5) + ".npy");
    const std::size_t kinds = r.optimizer == "adamw" ? 2 : r.momentum != 0 ? 1 : 0;
    EXPECT_EQ(got.state.size(), 1 + kinds * got.params.size());
    compare(got.norms, r.name + ".norms.npy");
    if (!got.norms.empty()) {  // the gradients are made so that clipping acts on some updates
      EXPECT_GT(*std::max_element(got.norms.begin(), got.norms.end()), r.max_norm);
      EXPECT_LT(*std::min_element(got.norms.begin(), got.norms.end()), r.max_norm);
    }
    RecordProperty("max_rel_diff_" + r.name, sci(worst));  // --gtest_output=xml only
  }
}

TEST_F(TorchReference, ScheduleMatchesNanoGPT) {
  for (std::size_t k = 0; k < schedules().size(); ++k) {
    const auto& s = schedules()[k];
    const LrSchedule schedule{s[0], s[1], static_cast<int64_t>(s[2]), static_cast<int64_t>(s[3])};
    SCOPED_TRACE("schedule " + std::to_string(k));
    std::vector<double> got;
    for (int64_t it = 0; it < schedule.steps; ++it) got.push_back(schedule(it));
    EXPECT_LE(rel_diff(got, expected("schedule." + std::to_string(k) + ".npy")), 1e-15);
  }
}


}  // namespace
}  // namespace tg::optim
