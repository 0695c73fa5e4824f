// Printing as PyTorch's: str() equals torch's own str() of the same tensors, byte for byte
// (integers, small floats, scientific notation, inf and nan, rank 0, 3 and 4, summarised 200 x 200,
// empty, requires_grad, a float64 default); streams and summaries. Keeps the library's own
// default dtype (no default_f64.cpp), which decides the dtype= suffix.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/ops.h>

#include "test_util.h"
#include "torch_util.h"

namespace tg {
namespace {

using test::blocks;
using test::DefaultDtypeScope;
using test::run_python;

// ---- printing --------------------------------------------------------------------------------

Tensor floats(int64_t n, double (*f)(int64_t), const Shape& shape, Dtype dtype = Dtype::f32) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = f(i);
  return from_vector(v, shape, dtype);
}

TEST(Print, IsTorchsStr) {
  TG_REQUIRE_PYTHON("torch");
  struct Case {
    const char* torch;  // an expression, or statements that set t
    std::function<std::string()> ours;
  };
  const auto str = [](Tensor t) { return [t] { return t.str(); }; };
  const double inf = INFINITY, nan = NAN;
  const std::vector<Case> cases = {
      {"torch.arange(12).reshape(3, 4)", str(reshape(arange(12), {3, 4}))},
      {"torch.tensor([[-100, 2], [3, 40000]])", str(from_indices({-100, 2, 3, 40000}, {2, 2}))},
      {"torch.tensor([2**62, -5])", str(from_indices({int64_t{1} << 62, -5}, {2}))},
      {"torch.tensor([[1.5, -2.25, 3.0], [0.125, 4.0, -5.5]])",
       str(from_vector({1.5, -2.25, 3.0, 0.125, 4.0, -5.5}, {2, 3}))},
      {"torch.tensor([1., 2., 3.])", str(from_vector({1, 2, 3}, {3}))},
      {"torch.zeros(2, 3)", str(zeros({2, 3}))},
      {"torch.linspace(0, 1, 5, dtype=torch.float64)", str(linspace(0, 1, 5, Dtype::f64))},
      {"torch.tensor([1e-5, 1.0, 123456.0])", str(from_vector({1e-5, 1.0, 123456.0}, {3}))},
      {"torch.tensor([-1e10, 2.5, 0.0])", str(from_vector({-1e10, 2.5, 0.0}, {3}))},
      {"torch.tensor([float('inf'), float('-inf'), float('nan'), 1.5])",
       str(from_vector({inf, -inf, nan, 1.5}, {4}))},
      {"torch.tensor([float('inf'), -2.0, 0.0])", str(from_vector({inf, -2.0, 0.0}, {3}))},
      {"torch.tensor(3.5)", str(scalar(3.5))},
      {"torch.tensor(-7)", str(from_indices({-7}, {}))},
      {"(torch.arange(24.) / 4).reshape(2, 3, 4)",
       str(floats(24, [](int64_t i) { return i / 4.0; }, {2, 3, 4}))},
      {"torch.arange(16).reshape(2, 2, 2, 2)", str(reshape(arange(16), {2, 2, 2, 2}))},
      {"torch.arange(30.) / 3",
       str(floats(30, [](int64_t i) { return double(float(i) / 3.0f); }, {30}))},
      {"torch.arange(40000.).reshape(200, 200)", str(reshape(arange(40000.0), {200, 200}))},
      {"(torch.arange(40000.) % 997 + 1.5).reshape(200, 200)",
       str(floats(40000, [](int64_t i) { return i % 997 + 1.5; }, {200, 200}))},
      {"torch.arange(2000)", str(arange(2000))},
      {"torch.arange(2000, dtype=torch.float64) * 0.5 + 0.25",
       str(floats(
           2000, [](int64_t i) { return i * 0.5 + 0.25; }, {2000}, Dtype::f64))},
      {"(torch.arange(1200.) / 8).reshape(4, 3, 10, 10)",
       str(floats(1200, [](int64_t i) { return i / 8.0; }, {4, 3, 10, 10}))},
      {"torch.zeros(0)", str(zeros({0}))},
      {"torch.zeros(0, 3)", str(zeros({0, 3}))},
      {"torch.zeros(0, dtype=torch.int64)", str(zeros({0}, Dtype::i64))},
      {"torch.tensor([1.5, 2.0], requires_grad=True)",
       str(from_vector({1.5, 2.0}, {2}).set_requires_grad())},
      {"torch.set_default_dtype(torch.float64)\n"
       "t = (str(torch.tensor([1.5, 2.0])), str(torch.tensor([1.5, 2.0], dtype=torch.float32)))\n"
       "torch.set_default_dtype(torch.float32)",
       [] {
         const DefaultDtypeScope f64(Dtype::f64);
         std::string s = "(";
         s += from_vector({1.5, 2.0}, {2}).str();
         s += ", " + from_vector({1.5, 2.0}, {2}, Dtype::f32).str() + ")";
         return s;
       }},
  };
  std::string script = "import torch\n";
  for (const Case& c : cases) {
    const std::string e = c.torch;
    script += (e.find('\n') == std::string::npos ? "t = " + e : e) +
              "\nprint(str(t) if torch.is_tensor(t) else '(' + ', '.join(map(str, t)) + ')')\n"
              "print('@@')\n";
  }
  const std::vector<std::string> out = blocks(run_python(script));
  ASSERT_EQ(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].torch);
    std::string want = out[i];
    for (size_t at; (at = want.find("torch.")) != std::string::npos;) want.erase(at, 6);
    EXPECT_EQ(cases[i].ours(), want);
  }
}

TEST(Print, SummarisesLargeTensorsAndStreams) {
  const Tensor big = reshape(arange(40000), {200, 200});
  const std::string s = big.str();
  EXPECT_LT(s.size(), 1000u);  // not 40000 numbers
  EXPECT_NE(s.find("..."), std::string::npos);
  std::ostringstream os;
  os << big << " " << big.shape();
  EXPECT_EQ(os.str(), s + " (200, 200)");
  // a result of an op names it
  Tensor x = from_vector({1, 2}, {2}).set_requires_grad();
  const Tensor y = relu(x);
  EXPECT_EQ(y.str(), "tensor([1., 2.], grad_fn=<" + y.op_name() + ">)");
  // precision
  EXPECT_EQ(from_vector({1.0 / 3}, {1}).str(2), "tensor([0.33])");
}

}  // namespace
}  // namespace tg
