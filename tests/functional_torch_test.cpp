// The functional API against torch.autograd.functional itself (tests/functional_reference.py),
// float64: vjp, jacobian, hessian, hvp and vhp, and forward mode's jvp, jacobian and hessian
// (forward over reverse; against PyTorch's jvp, jacobian and hessian), of single- and two-head attention, a tanh MLP and
// the tiny GPT's loss (tests/functional_util.h; the GPT is tests/gpt_reference.py's), every
// output and every result block to 1e-10 relative. A negative control: PyTorch's side with one
// weight moved by 1e-6 relative must disagree. A missing torch is a failure.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <tapegrad/check/functional.h>
#include <tapegrad/io/npy.h>
#include "functional_util.h"
#include "ops_torch_util.h"
#include "test_util.h"

namespace tg::test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kFunctions = {"vjp", "jacobian", "hessian", "hvp", "vhp", "jvp",
                                             "jacobian_forward", "hessian_forward"};

std::string npy(const char* stem, std::size_t i) { return numbered(stem, i); }
std::string block(std::size_t i, std::size_t j) {  // piece by piece: GCC 12 warns falsely on a chain of +
  std::string name = "J";
  name += std::to_string(i);
  name += '_';
  name += std::to_string(j);
  name += ".npy";
  return name;
}

// What tapegrad computed for one case: f's outputs, and the products (vjp, hvp, vhp) or the
// blocks (jacobian, hessian).
struct Answer {
  std::vector<Tensor> y, r;
  Jacobian J;
};

Answer compute(const Model& m, const std::string& function, const std::vector<Tensor>& v) {
  const std::vector<Tensor> x = inputs_of(m);
  if (function == "vjp") {
    auto [y, r] = vjp(m.f, x, v);
    return {y, r, {}};
  }
  if (function == "jvp") {
    auto [y, r] = jvp(m.f, x, v);
    return {y, r, {}};
  }
  if (function == "jacobian_forward") return {m.f(x), {}, jacobian(m.f, x, JacobianMode::forward)};
  if (function == "hessian_forward") return {m.scalar(x), {}, hessian(m.scalar, x, JacobianMode::forward)};
  if (function == "hvp" || function == "vhp") {
    auto [y, r] = function == "hvp" ? hvp(m.scalar, x, v) : vhp(m.scalar, x, v);
    return {{y}, r, {}};
  }
  if (function == "jacobian") return {m.f(x), {}, jacobian(m.f, x)};
  return {m.scalar(x), {}, hessian(m.scalar, x)};
}

// Writes a case's files for functional_reference.py; returns the vectors v it drew.
std::vector<Tensor> write_case(const fs::path& d, const Model& m, const std::string& function,
                               Rng& rng) {
  fs::create_directories(d);
  const std::vector<Tensor> x = inputs_of(m);
  for (std::size_t k = 0; k < x.size(); ++k) write_npy((d / npy("x", k)).string(), x[k]);
  if (m.name == "mlp") write_npy((d / "t.npy").string(), m.x.back());
  if (m.name == "gpt") {
    std::ofstream names(d / "names.txt");
    Rng unused(0);
    for (const auto& [name, p] : nn::GPT(tiny(), unused).named_parameters()) names << name << "\n";
    const auto as_double = [](const Tensor& t) { return t.to(Dtype::f64); };
    write_npy((d / "idx.npy").string(), as_double(gpt_idx()));
    write_npy((d / "targets.npy").string(), as_double(gpt_targets()));
  }
  std::vector<Tensor> v;
  if (function == "vjp")
    for (const Tensor& y : m.f(x)) v.push_back(randn(y.shape(), rng, Dtype::f64));
  if (function == "hvp" || function == "vhp" || function == "jvp")
    for (const Tensor& t : x) v.push_back(randn(t.shape(), rng, Dtype::f64));
  for (std::size_t k = 0; k < v.size(); ++k) write_npy((d / npy("v", k)).string(), v[k]);
  return v;
}

// The largest relative difference between an answer and PyTorch's files in d.
double worst(const Answer& a, const fs::path& d) {
  double w = 0;
  const auto against = [&](const Tensor& got, const std::string& file) {
    EXPECT_TRUE(fs::exists(d / file)) << file;
    if (!fs::exists(d / file)) return;
    const double e = max_rel_diff(got, read_npy((d / file).string()));
    EXPECT_LE(e, 1e-10) << file;
    w = std::max(w, e);
  };
  for (std::size_t i = 0; i < a.y.size(); ++i) against(a.y[i], npy("y", i));
  for (std::size_t j = 0; j < a.r.size(); ++j) against(a.r[j], npy("r", j));
  for (std::size_t i = 0; i < a.J.size(); ++i)
    for (std::size_t j = 0; j < a.J[i].size(); ++j) against(a.J[i][j], block(i, j));
  return w;
}

TEST(FunctionalTorch, MatchesTorchAutogradFunctional) {
  ASSERT_EQ(python_missing("numpy, torch"), "");
  const TempDir tmp;
  Rng rng(2202);
  struct Case {
    std::string dir;
    const Model* model;
    std::string function;
    std::vector<Tensor> v;
  };
  const std::vector<Model> all = models();
  std::vector<Case> cases;
  std::string list;
  for (const Model& m : all)
    for (const std::string& function : kFunctions) {
      const std::string dir = std::to_string(cases.size());
      cases.push_back({dir, &m, function, write_case(tmp / dir, m, function, rng)});
      list += dir + " " + m.name + " " + function + "\n";
    }
  // The negative control: PyTorch's MLP with W1[0, 0] moved by 1e-6 relative.
  const Model& mlp = all[2];
  ASSERT_EQ(mlp.name, "mlp");
  const std::string control = std::to_string(cases.size());
  write_case(tmp / control, mlp, "jacobian", rng);
  list += control + " mlp jacobian perturb\n";
  write_cases(tmp / "cases.txt", list);

  const std::string command = kPython + " " + TAPEGRAD_FUNCTIONAL_REFERENCE_PY + " --dir " +
                              tmp.path().string() + " > " + tmp.file("log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(tmp / "log");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model->name + " " + c.function);
    worst(compute(*c.model, c.function, c.v), tmp / c.dir);
  }
  // The control's Jacobian dy/dx (which W1 enters) must be told apart.
  const Jacobian J = jacobian(mlp.f, inputs_of(mlp));
  EXPECT_GT(max_rel_diff(J[0][0], read_npy((tmp / control / block(0, 0)).string())), 1e-10);
}

}  // namespace
}  // namespace tg::test
