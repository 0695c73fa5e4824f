// Op cases for div, exp, log, tanh, sqrt, rsqrt, relu, gelu, erf, mean, layer_norm, linear,
// log_softmax.
// Inputs are N(0, 1); ops with a restricted domain see them through pos() (or away from the kink
// for relu), inside the case function, so gradcheck's steps never leave the domain.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

void elementwise_unary_cases(Table& t) {
  const std::pair<const char*, Fn1> ops[] = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(pos(x)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sqrt", [](const Tensor& x) { return sqrt(pos(x)); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(pos(x)); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"erf", [](const Tensor& x) { return erf(x); }}};
  for (const auto& [op, f] : ops) {
    t.unary(op, "2d", {2, 3}, f);
    t.unary(op, "1xN", {1, 5}, f);
    t.unary(op, "Nx1", {4, 1}, f);
    if (std::string(op) != "relu") t.unary(op, "rank0", {}, f);  // relu's draw is negative
    t.unary(op, "rank3", {2, 3, 2}, f);
    t.unary(op, "rank4", {2, 1, 2, 3}, f);
  }
  t.unary("exp", "large_and_small", {2, 3}, [](const Tensor& x) { return exp(scale(x, 4.0)); });
  t.unary("tanh", "saturating", {2, 4}, [](const Tensor& x) { return tanh(scale(x, 3.0)); });
  t.unary("log", "near_zero", {2, 3}, [](const Tensor& x) {  // log of 0.01 .. 0.3
    return log(add(scale(mul(x, x), 0.05), constant(0.01, x)));
  });
  // relu's second derivative is zero: times x keeps the second-order check non-vacuous.
  t.unary("relu", "rank0_shifted", {},
          [](const Tensor& x) { return relu(add(x, constant(3.0, x))); });
  t.unary("relu", "times_x", {3, 4}, [](const Tensor& x) { return mul(relu(x), x); });

  for (const auto mode : {GeluApproximate::none, GeluApproximate::tanh}) {
    const std::string m = mode == GeluApproximate::none ? "erf_" : "tanh_";
    auto f = [mode](const Tensor& x) { return gelu(x, mode); };
    t.unary("gelu", m + "2d", {2, 3}, f);
    t.unary("gelu", m + "1xN", {1, 5}, f);
    t.unary("gelu", m + "Nx1", {4, 1}, f);
    t.unary("gelu", m + "rank3", {2, 3, 2}, f);
    t.unary("gelu", m + "rank4", {2, 1, 2, 3}, f);
    t.unary("gelu", m + "wide_range", {3, 4},
            [mode](const Tensor& x) { return gelu(scale(x, 3.0), mode); });
  }
}

void div_cases(Table& t) {
  // Denominators through pos() (>= 0.5), negated for every other case so both signs are seen.
  auto dv = [](bool negate) {
    return [negate](const Tensor& a, const Tensor& b) {
      return div(a, negate ? scale(pos(b), -1.0) : pos(b));
    };
  };
  t.binary("div", "same_shape", {2, 3}, {2, 3}, dv(false));
  t.binary("div", "broadcast_second", {2, 3}, {3}, dv(true));
  t.binary("div", "broadcast_first", {3}, {2, 3}, dv(false));
  t.binary("div", "broadcast_both", {2, 1, 3}, {4, 1}, dv(true));
  t.binary("div", "outer_Nx1_1xN", {3, 1}, {1, 4}, dv(false));
  t.binary("div", "scalar_second", {2, 3}, {}, dv(true));
  t.binary("div", "scalar_first", {}, {2, 3}, dv(false));
  t.binary("div", "rank4_broadcast_both", {2, 1, 3, 1}, {1, 2, 1, 2}, dv(true));
  t.unary("div", "same_input_twice", {2, 3}, [](const Tensor& x) { return div(x, pos(x)); });
}

void mean_cases(Table& t) {
  t.unary("mean", "all", {3, 4}, [](const Tensor& x) { return mean(x); });
  t.unary("mean", "all_rank0", {}, [](const Tensor& x) { return mean(x); });
  t.unary("mean", "all_rank4", {2, 1, 2, 3}, [](const Tensor& x) { return mean(x); });
  t.unary("mean", "axis0", {3, 4}, [](const Tensor& x) { return mean(x, 0); });
  t.unary("mean", "axis1_keepdim", {3, 4}, [](const Tensor& x) { return mean(x, 1, true); });
  t.unary("mean", "Nx1_axis0", {4, 1}, [](const Tensor& x) { return mean(x, 0); });
  t.unary("mean", "1xN_axis_minus1", {1, 5}, [](const Tensor& x) { return mean(x, -1); });
  t.unary("mean", "axis_minus1_rank3", {2, 3, 4}, [](const Tensor& x) { return mean(x, -1); });
  t.unary("mean", "axis_minus3_keepdim_rank4", {2, 3, 1, 2},
          [](const Tensor& x) { return mean(x, -3, true); });
}

void layer_norm_cases(Table& t) {
  auto affine = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{layer_norm(x[0], x[1], x[2])};
  };
  t.add("layer_norm", "weight_bias", {{4, 5}, {5}, {5}}, affine);
  t.add("layer_norm", "weight_bias_rank3", {{2, 3, 4}, {4}, {4}}, affine);
  t.add("layer_norm", "weight_bias_rank4", {{2, 1, 2, 5}, {5}, {5}}, affine);
  t.add("layer_norm", "weight_bias_1xN", {{1, 6}, {6}, {6}}, affine);
  t.add("layer_norm", "weight_bias_T1", {{2, 1, 4}, {4}, {4}}, affine);
  // C = 1: x - mean is exactly 0, so dX must be exactly 0; the bias keeps the case non-vacuous.
  t.add("layer_norm", "weight_bias_Nx1", {{3, 1}, {1}, {1}}, affine);
  t.add("layer_norm", "weight_only", {{3, 4}, {4}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{layer_norm(x[0], x[1], Tensor())};
  });
  t.add("layer_norm", "bias_only_eps_0.1", {{3, 4}, {4}}, [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{layer_norm(x[0], Tensor(), x[1], 0.1)};
  });
  auto plain = [](const Tensor& x) { return layer_norm(x, Tensor(), Tensor()); };
  t.unary("layer_norm", "no_affine", {3, 5}, plain);
  t.unary("layer_norm", "no_affine_rank3", {2, 2, 3}, plain);
  t.unary("layer_norm", "no_affine_offset_and_scale", {2, 4}, [](const Tensor& x) {
    return layer_norm(add(scale(x, 30.0), constant(100.0, x)), Tensor(), Tensor());
  });
}

void linear_cases(Table& t) {
  auto with_bias = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{linear(x[0], x[1], x[2])};
  };
  auto no_bias = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{linear(x[0], x[1])};
  };
  t.add("linear", "2d", {{4, 3}, {5, 3}, {5}}, with_bias);
  t.add("linear", "rank3", {{2, 3, 4}, {2, 4}, {2}}, with_bias);
  t.add("linear", "rank4", {{2, 1, 2, 3}, {4, 3}, {4}}, with_bias);
  t.add("linear", "rank1_input", {{3}, {2, 3}, {2}}, with_bias);  // (in) -> (out), as PyTorch
  t.add("linear", "1xN", {{1, 6}, {3, 6}, {3}}, with_bias);
  t.add("linear", "one_output", {{4, 3}, {1, 3}, {1}}, with_bias);
  t.add("linear", "one_input", {{4, 1}, {3, 1}, {3}}, with_bias);
  t.add("linear", "no_bias", {{3, 4}, {2, 4}}, no_bias);
  t.add("linear", "no_bias_rank3", {{2, 2, 3}, {4, 3}}, no_bias);
}

// A (rows, n) mask: 0 where allowed, -inf where masked.
Tensor partial_mask() {
  return from_vector({0, -kInf, 0, 0, -kInf, -kInf, -kInf, -kInf, 0, 0, -kInf, 0}, {3, 4},
                     Dtype::f64);
}

void log_softmax_cases(Table& t) {
  auto ls = [](const Tensor& x) { return log_softmax(x); };
  t.unary("log_softmax", "1xN", {1, 5}, ls);
  // One column gives the constant 0, so its gradient must be exactly 0; plus x keeps the case
  // non-vacuous while checking that zero.
  t.unary("log_softmax", "Nx1_plus_x", {5, 1},
          [](const Tensor& x) { return add(log_softmax(x), x); });
  t.unary("log_softmax", "non_square", {3, 5}, ls);
  t.unary("log_softmax", "rank3", {2, 3, 4}, ls);
  t.unary("log_softmax", "rank4", {2, 2, 2, 3}, ls);
  t.unary("log_softmax", "T1", {2, 1, 4}, ls);
  t.add_inputs("log_softmax", "logits_1e4",
               {from_vector({1e4, 1e4 - 0.7, -1e4, 1e4 + 0.3,  //
                             -1e4, -1e4 + 1.2, -1e4 - 0.4, -1e4 + 0.1},
                            {2, 4}, Dtype::f64)},
               [](const std::vector<Tensor>& x) { return std::vector<Tensor>{log_softmax(x[0])}; });
  // Masked entries come out -inf, where central differences are NaN: the masked cases look at
  // exp(log_softmax), which is 0 there, and at the finite entries of the other rows.
  const Tensor M = partial_mask();
  t.unary("log_softmax", "masked_rows_then_exp", {3, 4},
          [M](const Tensor& x) { return exp(log_softmax(add_mask(x, as(M, x)))); });
  t.unary("log_softmax", "causal_masked_then_exp_rank3", {2, 4, 4},
          [](const Tensor& x) { return exp(log_softmax(add_mask(x, causal_mask(4, x.dtype())))); });
}

}  // namespace

void training_op_cases(Table& t) {
  elementwise_unary_cases(t);
  div_cases(t);
  mean_cases(t);
  layer_norm_cases(t);
  linear_cases(t);
  log_softmax_cases(t);
}

}  // namespace tg::detail
