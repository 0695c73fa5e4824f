#pragma once
// The op-case table's building blocks (internal to check/): the registry's rows live in
// registry*.cpp, one function per group of ops, all called from op_cases().

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <tapegrad/check/registry.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// FNV-1a: a seed that depends only on the case name and input index.
inline uint64_t seed_of(const std::string& name, std::size_t input) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name + "#" + std::to_string(input)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// A constant captured by a case, in the dtype of the tensor it meets.
inline Tensor as(const Tensor& c, const Tensor& like) {
  return c.dtype() == like.dtype() ? c : c.to(like.dtype());
}

// Fixed random weights: sum(Y * W) reduces Y to a scalar without the blind spots of a plain sum.
inline Tensor weights(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  return randn(s, rng, Dtype::f64);
}

inline GradcheckOptions tol(double atol = 1e-5, double rtol = 1e-3) {
  GradcheckOptions o;
  o.atol = atol;
  o.rtol = rtol;
  return o;
}

using Fn1 = std::function<Tensor(const Tensor&)>;
using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

// A constant in the dtype of the tensor it meets.
inline Tensor constant(double c, const Tensor& like) { return scalar(c, like.dtype()); }
// x^2 + 0.5: positive, smooth, and as wide a spread as x gives (for ops with a restricted domain).
inline Tensor pos(const Tensor& x) { return add(mul(x, x), constant(0.5, x)); }
// A case's function of its one input.
inline Function one(Fn1 f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
}

class Table {
 public:
  // Inputs drawn from N(0, 1) with the case's own seed.
  void add(const std::string& op, const std::string& name, const std::vector<Shape>& shapes,
           Function fn, GradcheckOptions o = tol()) {
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Rng rng(seed_of(op + "/" + name, i));
      inputs.push_back(randn(shapes[i], rng, Dtype::f64));
    }
    add_inputs(op, name, std::move(inputs), std::move(fn), o);
  }
  void add_inputs(const std::string& op, const std::string& name, std::vector<Tensor> inputs,
                  Function fn, GradcheckOptions o = tol()) {
    cases_.push_back({op, op + "/" + name, std::move(inputs), std::move(fn), o, true});
  }
  void unary(const std::string& op, const std::string& name, const Shape& s, Fn1 f,
             GradcheckOptions o = tol()) {
    Function fn = [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
    add(op, name, {s}, std::move(fn), o);
  }
  void binary(const std::string& op, const std::string& name, const Shape& a, const Shape& b, Fn2 f,
              GradcheckOptions o = tol()) {
    Function fn = [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
    add(op, name, {a, b}, std::move(fn), o);
  }
  // The last case added is checked to first order only: its second differences straddle a kink
  // (a tie of maximum, x = y in l1_loss) where the gradient jumps.
  void first_order_only() { cases_.back().second_order = false; }
  std::vector<OpCase> take() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
};


// Row groups defined in other files of check/.
void training_op_cases(Table& t);  // check/registry_training.cpp
void index_op_cases(Table& t);     // check/registry_index.cpp
void dims_op_cases(Table& t);      // check/registry_dims.cpp
void elementwise_op_cases(Table& t);  // check/registry_elementwise.cpp
void loss_op_cases(Table& t);         // check/registry_losses.cpp
void conv_op_cases(Table& t);      // check/registry_conv.cpp
void norm_op_cases(Table& t);      // check/registry_norm.cpp
void reduction_op_cases(Table& t);  // check/registry_reductions.cpp
void shape_op_cases(Table& t);     // check/registry_shape.cpp
void rank_op_cases(Table& t);      // check/registry_ranks.cpp

}  // namespace tg::detail
