// The bool dtype and the ops that make and take it: the comparisons against the IEEE rules by
// hand (NaN, infinities, ties, int64 and bool operands, broadcasting, scalars) and against
// PyTorch; where and masked_fill against PyTorch (values and the gradient of a random-weighted
// sum, float64 to 1e-12, float32 forward to 1e-6) with broadcast masks; bool tensors made,
// converted, printed and saved (safetensors BOOL, a byte other than 0 or 1 refused); and the
// errors for a bool where floats are needed and a float where a mask is. Without python3, numpy
// and torch the PyTorch test skips, or fails when the environment variable CI is set.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/io/npy.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/ops/ops.h>
#include "bad_input_util.h"
#include "test_util.h"
#include "torch_util.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::vector<bool> bools(const Tensor& t) {
  EXPECT_EQ(t.dtype(), Dtype::b8);
  std::vector<bool> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.data<bool>()[i]);
  return v;
}

TEST(Compare, FollowIeeeOnNanInfinitiesAndTies) {
  const std::vector<double> a = {1, 2, kNan, kInf, -kInf, 0.0, -0.0, 3};
  const std::vector<double> b = {1, 3, kNan, kInf, 5, -0.0, 0.0, kNan};
  for (Dtype d : {Dtype::f64, Dtype::f32}) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor A = from_vector(a, {8}, d), B = from_vector(b, {8}, d);
    std::vector<bool> want_eq, want_lt, want_le;
    for (int i = 0; i < 8; ++i) {
      want_eq.push_back(a[i] == b[i]);
      want_lt.push_back(a[i] < b[i]);
      want_le.push_back(a[i] <= b[i]);
    }
    EXPECT_EQ(bools(eq(A, B)), want_eq);
    EXPECT_EQ(bools(lt(A, B)), want_lt);
    EXPECT_EQ(bools(le(A, B)), want_le);
    // NaN is unequal to everything, itself included; 0 and -0 are equal
    EXPECT_EQ(bools(ne(A, B)), (std::vector<bool>{false, true, true, false, true, false, false, true}));
    EXPECT_EQ(bools(gt(A, B)), (std::vector<bool>{false, false, false, false, false, false, false, false}));
    EXPECT_EQ(bools(ge(A, B)), (std::vector<bool>{true, false, false, true, false, true, true, false}));
    EXPECT_FALSE(eq(A, B).requires_grad());
  }
}

TEST(Compare, BroadcastTakeScalarsInt64AndBool) {
  const Tensor col = from_vector({1, 2, 3}, {3, 1}, Dtype::f64);
  const Tensor row = from_vector({2, 1, 3, 0}, {4}, Dtype::f64);
  const Tensor m = lt(col, row);  // (3, 4)
  ASSERT_EQ(m.shape(), Shape({3, 4}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(m.data<bool>()[i * 4 + j], col.at({i, 0}) < row.at({j}));
  EXPECT_EQ(bools(ge(row, 2.0)), (std::vector<bool>{true, false, true, false}));
  const Tensor idx = from_indices({4, -1, 7}, {3});
  EXPECT_EQ(bools(eq(idx, from_indices({4, 1, 7}, {3}))), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(bools(gt(idx, 3.0)), (std::vector<bool>{true, false, true}));
  const Tensor mask = from_bools({true, false, true}, {3});
  EXPECT_EQ(bools(ne(mask, from_bools({true, true, false}, {3}))), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(bools(logical_not(mask)), (std::vector<bool>{false, true, false}));
  // requires_grad inputs give a mask that requires none, and nothing on the tape
  const Tensor x = from_vector({1, -1}, {2}, Dtype::f64).set_requires_grad();
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
}

TEST(BoolTensor, MadeConvertedPrintedAndSaved) {
  const Tensor m = from_bools({true, false, true, true}, {2, 2});
  EXPECT_EQ(m.dtype(), Dtype::b8);
  EXPECT_EQ(std::string(dtype_name(m.dtype())), "bool");
  EXPECT_EQ(m.to_vector(), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(m.to(Dtype::f32).to_vector(), (std::vector<double>{1, 0, 1, 1}));
  // float -> bool is x != 0, as PyTorch's (NaN is true)
  EXPECT_EQ(bools(from_vector({0.0, -0.0, 2.5, kNan}, {4}, Dtype::f64).to(Dtype::b8)),
            (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(m.str(), "tensor([[ True, False],\n        [ True,  True]])");
  EXPECT_THROW(Tensor(m).set_requires_grad(), ValueError);
  EXPECT_THROW(from_bools({true}, {2}), ShapeError);

  const test::TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"mask", m}});
  const SafeTensors back = read_safetensors(dir.file("m.safetensors"));
  ASSERT_EQ(back.tensors.size(), 1u);
  EXPECT_EQ(bools(back.tensors[0].second), bools(m));
  std::string bytes = test::slurp(dir / "m.safetensors");
  EXPECT_NE(bytes.find("\"BOOL\""), std::string::npos);
  bytes[bytes.size() - 1] = 2;  // the last element's byte: no bool
  try {
    parse_safetensors(bytes, "m.safetensors");
    FAIL() << "a BOOL byte of 2 was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("'mask' is BOOL but its byte 3 is 2"), std::string::npos)
        << e.what();
  }
}

// The mask ops against PyTorch: comparisons (as 0/1), where and masked_fill with their
// gradients. Inputs and masks go through .npy files; torch reads the masks as bool.
TEST(MaskOps, MatchPyTorch) {
  TG_REQUIRE_PYTHON("numpy, torch");
  const test::TempDir dir;
  Rng rng(7);
  const Tensor A = randn({2, 3, 4}, rng, Dtype::f64), B = randn({3, 1}, rng, Dtype::f64);
  // ties and a NaN for the comparisons
  Tensor C = A.clone();
  C.set({0, 1, 2}, B.at({1, 0}));
  C.set({1, 0, 0}, kNan);
  const Tensor cond = gt(randn({2, 1, 4}, rng, Dtype::f64), 0.0);
  const Tensor mask = lt(randn({3, 4}, rng, Dtype::f64), 0.3);
  const Tensor w = randn({2, 3, 4}, rng, Dtype::f64);
  for (const auto& [name, t] : std::vector<std::pair<std::string, Tensor>>{
           {"A", A}, {"B", B}, {"C", C}, {"cond", cond}, {"mask", mask}, {"w", w}})
    write_npy(dir.file(name + ".npy"), t);
  const std::string out = test::run_python(R"(
import numpy as np, torch
d = ")" + dir.path().string() + R"("
L = lambda n: torch.from_numpy(np.load(d + "/" + n + ".npy"))
A, B, C, cond, mask, w = (L(n) for n in ("A", "B", "C", "cond", "mask", "w"))
assert cond.dtype == torch.bool and mask.dtype == torch.bool
for name, f in (("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le),
                ("gt", torch.gt), ("ge", torch.ge)):
    np.save(d + "/" + name + ".npy", f(C, B).double().numpy())
A.requires_grad_(); B.requires_grad_()
y = torch.where(cond, A, B)
gA, gB = torch.autograd.grad((y * w).sum(), (A, B))
np.save(d + "/where.npy", y.detach().numpy()); np.save(d + "/where_dA.npy", gA.numpy())
np.save(d + "/where_dB.npy", gB.numpy())
z = A.masked_fill(mask, -2.5)
(gz,) = torch.autograd.grad((z * w).sum(), (A,))
np.save(d + "/fill.npy", z.detach().numpy()); np.save(d + "/fill_dA.npy", gz.numpy())
np.save(d + "/fill32.npy", A.detach().float().masked_fill(mask, -2.5).double().numpy())
print("ok")
)");
  ASSERT_NE(out.find("ok"), std::string::npos) << out;
  const auto npy = [&](const std::string& n) { return read_npy(dir.file(n + ".npy")); };
  const std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)> cmps[] = {
      {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}};
  for (const auto& [name, f] : cmps)
    EXPECT_EQ(f(C, B).to(Dtype::f64).to_vector(), npy(name).to_vector()) << name;

  const Tensor a = A.clone().set_requires_grad(), b = B.clone().set_requires_grad();
  const Tensor y = where(cond, a, b);
  sum(mul(y, w)).backward();
  EXPECT_EQ(y.to_vector(), npy("where").to_vector());
  EXPECT_LE(max_abs_diff(a.grad(), npy("where_dA")), 1e-12);
  EXPECT_LE(max_abs_diff(b.grad(), npy("where_dB")), 1e-12);
  EXPECT_GT(max_abs_diff(b.grad(), zeros({3, 1}, Dtype::f64)), 0.1);  // B gets a share

  const Tensor x = A.clone().set_requires_grad();
  const Tensor z = masked_fill(x, mask, -2.5);
  sum(mul(z, w)).backward();
  EXPECT_EQ(z.to_vector(), npy("fill").to_vector());
  EXPECT_LE(max_abs_diff(x.grad(), npy("fill_dA")), 1e-12);
  EXPECT_EQ(masked_fill(A.to(Dtype::f32), mask, -2.5).to(Dtype::f64).to_vector(),
            npy("fill32").to_vector());
  // negative control: the other mask gives other values
  EXPECT_NE(masked_fill(A, logical_not(mask), -2.5).to_vector(), npy("fill").to_vector());
}

TEST(MaskOps, BadInputsNameTheOpAndShapes) {
  using test::bad_input::BadCase;
  using test::bad_input::Kind;
  using test::bad_input::z;
  const Tensor m = from_bools({true, false}, {2});
  test::bad_input::expect_bad_cases({
      {"relu of a bool", [&] { relu(m); }, Kind::Value, {"relu", "bool", "(2,)"}},
      {"matmul of a bool", [&] { matmul(from_bools({true, false, true, true}, {2, 2}), z({2, 2})); },
       Kind::Value, {"matmul", "bool"}},
      {"add of bools", [&] { add(m, m); }, Kind::Value, {"add", "bool", "(2,)"}},
      {"softmax of a bool", [&] { softmax(m); }, Kind::Value, {"softmax", "bool", "(2,)"}},
      {"sum of a bool", [&] { sum(m); }, Kind::Value, {"sum", "bool", "(2,)"}},
      {"where with a float cond", [&] { where(z({2}), z({2}), z({2})); }, Kind::Value,
       {"where", "cond must be a bool tensor", "float64", "(2,)"}},
      {"where of bools", [&] { where(m, m, m); }, Kind::Value, {"where", "bool", "(2,)"}},
      {"where dtypes differ", [&] { where(m, z({2}), z({2}, Dtype::f32)); }, Kind::Value,
       {"where", "dtypes differ", "float64", "float32"}},
      {"where shapes do not broadcast", [&] { where(m, z({3}), z({2})); }, Kind::Shape,
       {"where", "(2,)", "(3,)"}},
      {"masked_fill with an int64 mask", [&] { masked_fill(z({2}), from_indices({1, 0}, {2}), 0.0); },
       Kind::Value, {"masked_fill", "mask must be a bool tensor", "int64", "(2,)"}},
      {"masked_fill with a mask larger than X",
       [&] { masked_fill(z({2}), from_bools({true, false, true, false}, {2, 2}), 0.0); },
       Kind::Shape, {"masked_fill", "(2, 2)", "does not broadcast to X's shape (2,)"}},
      {"masked_fill of a bool", [&] { masked_fill(m, m, 1.0); }, Kind::Value, {"masked_fill", "bool"}},
      {"compare dtypes differ", [&] { lt(z({2}), from_indices({1, 2}, {2})); }, Kind::Value,
       {"lt", "dtypes differ", "float64", "int64"}},
      {"compare shapes do not broadcast", [&] { eq(z({2}), z({3})); }, Kind::Shape, {"eq", "(2,)", "(3,)"}},
      {"logical_not of a float", [&] { logical_not(z({2})); }, Kind::Value,
       {"logical_not", "bool", "float64"}},
  });
}

}  // namespace
}  // namespace tg
