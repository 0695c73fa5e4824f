// Op cases for sigmoid, silu, softplus, abs, pow, clamp, maximum, minimum, rms_norm, where,
// masked_fill (their bool masks fixed patterns, or a comparison of an input), lstm_scan and
// gru_scan. Ties of
// maximum / minimum are checkable by finite differences (the central difference at a tie is
// the half-and-half split); clamp at its bounds is not (it sees the one-sided average 1/2 where
// PyTorch passes 1), so those values are checked against PyTorch in tests/ops_torch_test.cpp.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

void unary_cases(Table& t) {
  const std::pair<const char*, Fn1> ops[] = {
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"pow", [](const Tensor& x) { return pow(pos(x), 1.5); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }}};
  for (const auto& [op, f] : ops) {
    t.unary(op, "2d", {2, 3}, f);
    t.unary(op, "1xN", {1, 5}, f);
    t.unary(op, "Nx1", {4, 1}, f);
    if (std::string(op) != "clamp") t.unary(op, "rank0", {}, f);  // clamp's draw is outside
    t.unary(op, "rank3", {2, 3, 2}, f);
    t.unary(op, "rank4", {2, 1, 2, 3}, f);
  }
  // Large and infinite inputs: exp(-X) overflows to inf and the output saturates, exactly.
  const Tensor extremes = from_vector({-800, -40, -3, 0, 2.5, 40, 800, -kInf, kInf}, {3, 3}, Dtype::f64);
  t.add_inputs("sigmoid", "saturating_and_inf", {extremes}, one([](const Tensor& x) { return sigmoid(x); }));
  t.unary("sigmoid", "wide_range", {3, 4}, [](const Tensor& x) { return sigmoid(scale(x, 6.0)); });
  t.add_inputs("silu", "saturating", {from_vector({-800, -40, -3, 0, 2.5, 40, 800}, {7}, Dtype::f64)},
               one([](const Tensor& x) { return silu(x); }));
  t.unary("silu", "wide_range", {3, 4}, [](const Tensor& x) { return silu(scale(x, 6.0)); });
  // Both sides of the threshold switch (beta X = 20), and beta 2 / threshold 5.
  t.add_inputs("softplus", "threshold_switch",
               {from_vector({-800, -30, -1, 0, 19.5, 20.5, 30, 800}, {2, 4}, Dtype::f64)},
               one([](const Tensor& x) { return softplus(x); }));
  t.unary("softplus", "beta2_threshold5", {3, 4},
          [](const Tensor& x) { return softplus(scale(x, 3.0), 2.0, 5.0); });
  t.unary("softplus", "beta_negative", {2, 3}, [](const Tensor& x) { return softplus(x, -1.5); });
  // abs at 0: PyTorch's gradient 0 is also the central difference there.
  t.add_inputs("abs", "at_zero", {from_vector({-1.5, 0, 2, 0, -0.25, 3}, {2, 3}, Dtype::f64)},
               one([](const Tensor& x) { return mul(abs(x), x); }));
  t.unary("abs", "times_x", {3, 4}, [](const Tensor& x) { return mul(abs(x), x); });
  const std::pair<const char*, double> powers[] = {
      {"p2", 2.0}, {"p3", 3.0}, {"p0.5", 0.5}, {"p-1", -1.0}, {"p-2.5", -2.5}, {"p1_3", 1.0 / 3}};
  for (const auto& [name, p] : powers)
    t.unary("pow", name, {2, 3}, [p = p](const Tensor& x) { return pow(pos(x), p); });
  t.unary("pow", "p3_negative_base", {2, 3}, [](const Tensor& x) { return pow(x, 3.0); });
  t.unary("pow", "p2_rank4", {2, 1, 2, 3}, [](const Tensor& x) { return pow(x, 2.0); });
  // At 0 (p > 1: the gradient 0); for p < 1, where it is inf, tests/ops_torch_test.cpp compares
  // with PyTorch instead.
  t.add_inputs("pow", "p2_at_zero", {from_vector({0, 1.5, -0.5, 0}, {2, 2}, Dtype::f64)},
               one([](const Tensor& x) { return pow(x, 2.0); }));
  t.add_inputs("pow", "p3_at_zero", {from_vector({0, 1.5, -0.5, 0}, {2, 2}, Dtype::f64)},
               one([](const Tensor& x) { return pow(x, 3.0); }));
  t.unary("clamp", "rank0_inside", {}, [](const Tensor& x) { return clamp(scale(x, 0.1), -0.5, 0.7); });
  t.unary("clamp", "one_sided_lo", {3, 4}, [](const Tensor& x) { return clamp(x, -0.2, kInf); });
  t.unary("clamp", "one_sided_hi", {3, 4}, [](const Tensor& x) { return clamp(x, -kInf, 0.3); });
  t.unary("clamp", "times_x", {3, 4}, [](const Tensor& x) { return mul(clamp(x, -0.5, 0.5), x); });
  t.unary("clamp", "lo_equals_hi_plus_x", {2, 3},
          [](const Tensor& x) { return add(clamp(x, 0.25, 0.25), x); });
}

void binary_cases(Table& t) {
  for (const char* op : {"maximum", "minimum"}) {
    const bool mx = op[1] == 'a';
    auto f = [mx](const Tensor& a, const Tensor& b) { return mx ? maximum(a, b) : minimum(a, b); };
    t.binary(op, "same_shape", {2, 3}, {2, 3}, f);
    t.binary(op, "1xN", {1, 5}, {1, 5}, f);
    t.binary(op, "Nx1", {4, 1}, {4, 1}, f);
    t.binary(op, "rank0", {}, {}, f);
    t.binary(op, "rank3", {2, 3, 2}, {2, 3, 2}, f);
    t.binary(op, "broadcast_second", {2, 3}, {3}, f);
    t.binary(op, "broadcast_first", {3}, {2, 3}, f);
    t.binary(op, "outer_Nx1_1xN", {3, 1}, {1, 4}, f);
    t.binary(op, "scalar_second", {2, 3}, {}, f);
    t.binary(op, "rank4_broadcast_both", {2, 1, 3, 1}, {1, 2, 1, 2}, f);
    // Ties (the gradient split half and half), a tie broadcast to several outputs, -inf.
    Fn2 times = [f](const Tensor& a, const Tensor& b) { return mul(f(a, b), add(a, b)); };
    Function two = [times](const std::vector<Tensor>& x) { return std::vector<Tensor>{times(x[0], x[1])}; };
    t.add_inputs(op, "ties", {from_vector({1, -2, 0.5, 3, 0, -1}, {2, 3}, Dtype::f64),
                              from_vector({1, -1, 0.5, 2, 0, -3}, {2, 3}, Dtype::f64)}, two);
    t.first_order_only();
    t.add_inputs(op, "ties_broadcast", {from_vector({0.5, -1, 0.5, 2, 0.5, -1}, {3, 2}, Dtype::f64),
                                        from_vector({0.5, -1}, {2}, Dtype::f64)}, two);
    t.first_order_only();
    // The losing side infinite (-inf for maximum, inf for minimum): it gets no gradient.
    const double inf = mx ? -kInf : kInf;
    t.add_inputs(op, "infinite", {from_vector({inf, -2, 0.5, 3}, {2, 2}, Dtype::f64),
                                  from_vector({1, inf, inf, 2}, {2, 2}, Dtype::f64)},
                 [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; });
    t.unary(op, "same_input_twice", {2, 3}, [f](const Tensor& x) { return mul(f(x, x), x); });
  }
}

void rms_norm_cases(Table& t) {
  auto weighted = [](double eps) {
    return [eps](const std::vector<Tensor>& x) { return std::vector<Tensor>{rms_norm(x[0], x[1], eps)}; };
  };
  t.add("rms_norm", "weight", {{4, 5}, {5}}, weighted(1e-6));
  t.add("rms_norm", "weight_rank3", {{2, 3, 4}, {4}}, weighted(1e-6));
  t.add("rms_norm", "weight_rank4", {{2, 1, 2, 5}, {5}}, weighted(1e-5));
  t.add("rms_norm", "weight_1xN", {{1, 6}, {6}}, weighted(1e-6));
  t.add("rms_norm", "weight_Nx1", {{3, 1}, {1}}, weighted(1e-6));
  t.add("rms_norm", "weight_rank1", {{5}, {5}}, weighted(1e-6));
  t.add("rms_norm", "weight_T1", {{2, 1, 4}, {4}}, weighted(1e-6));
  t.add("rms_norm", "weight_eps_0.5", {{3, 4}, {4}}, weighted(0.5));
  auto plain = [](const Tensor& x) { return rms_norm(x, Tensor(), 1e-6); };
  t.unary("rms_norm", "no_weight", {3, 5}, plain);
  t.unary("rms_norm", "no_weight_rank4", {2, 2, 1, 3}, plain);
  t.unary("rms_norm", "no_weight_large", {2, 4},
          [](const Tensor& x) { return rms_norm(add(scale(x, 30.0), constant(100.0, x)), Tensor(), 1e-6); });
}

// A fixed mask of shape s: element i holds unless i % every == 0.
Tensor pattern(const Shape& s, int64_t every) {
  std::vector<bool> v(s.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i) % every != 0;
  return from_bools(v, s);
}

void mask_cases(Table& t) {
  struct Shapes {
    const char* name;
    Shape cond, a, b;
  };
  const Shapes shapes[] = {{"2d", {2, 3}, {2, 3}, {2, 3}},
                           {"1xN", {1, 5}, {1, 5}, {1, 5}},
                           {"Nx1", {4, 1}, {4, 1}, {4, 1}},
                           {"rank0", {}, {}, {}},
                           {"rank4", {2, 1, 2, 3}, {2, 1, 2, 3}, {2, 1, 2, 3}},
                           {"cond_broadcasts", {1, 3}, {2, 3}, {2, 3}},
                           {"A_and_B_broadcast", {2, 3, 4}, {3, 1}, {4}},
                           {"all_broadcast", {2, 1, 4}, {1, 3, 1}, {3, 4}},
                           {"B_scalar", {3, 4}, {3, 4}, {}}};
  for (const Shapes& s : shapes) {
    const Tensor cond = pattern(s.cond, 3);
    t.add("where", s.name, {s.a, s.b}, [cond](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{where(cond, x[0], x[1])};
    });
  }
  // the mask every element or none: all the gradient to one side
  for (const auto& [name, every] : {std::pair{"cond_all", int64_t{1 << 30}}, std::pair{"cond_none", int64_t{1}}}) {
    const Tensor cond = pattern({2, 3}, every);
    t.add("where", name, {{2, 3}, {2, 3}}, [cond](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{mul(where(cond, x[0], x[1]), x[0])};
    });
  }
  // a mask from a comparison of the inputs themselves (a ReLU-like kink, kept away from 0)
  t.add_inputs("where", "cond_from_gt", {from_vector({-1.5, 0.7, 2, -0.3, 1.1, -2.2}, {2, 3}, Dtype::f64)},
               one([](const Tensor& x) { return where(gt(x, 0.0), mul(x, x), scale(x, -0.5)); }));
  t.unary("where", "scalar_other_side", {3, 4},
          [](const Tensor& x) { return where(pattern(x.shape(), 2), x, 2.5); });

  const std::pair<const char*, Shape> fills[] = {
      {"2d", {2, 3}}, {"1xN", {1, 5}}, {"Nx1", {4, 1}}, {"rank0", {}}, {"rank3", {2, 3, 2}},
      {"rank4", {2, 1, 2, 3}}};
  for (const auto& [name, s] : fills) {
    const Tensor mask = pattern(s, 2);
    t.unary("masked_fill", name, s, [mask](const Tensor& x) { return masked_fill(x, mask, -0.75); });
  }
  const Tensor row = pattern({1, 4}, 3), col = pattern({3, 1}, 2);
  t.unary("masked_fill", "mask_broadcasts_rows", {3, 4}, [row](const Tensor& x) { return masked_fill(x, row, 1.0); });
  t.unary("masked_fill", "mask_broadcasts_cols", {3, 4}, [col](const Tensor& x) { return masked_fill(x, col, 0.0); });
  // -inf fill before a softmax: a masked attention row
  const Tensor causal = [] {
    std::vector<bool> v(16);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) v[i * 4 + j] = j > i;
    return from_bools(v, {4, 4});
  }();
  t.unary("masked_fill", "minus_inf_then_softmax", {2, 4, 4},
          [causal](const Tensor& x) { return softmax(masked_fill(x, causal, -kInf)); });
}

// lstm_scan's inputs gi (T, B, 4H), w_hh (4H, H), bias (4H), h0 and c0 (B, H).
void lstm_scan_cases(Table& t) {
  const Function f = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{lstm_scan(x[0], x[1], x[2], x[3], x[4])};
  };
  const auto add = [&](const char* name, int64_t T, int64_t B, int64_t H) {
    t.add("lstm_scan", name, {{T, B, 4 * H}, {4 * H, H}, {4 * H}, {B, H}, {B, H}}, f);
  };
  add("T3_B2_H3", 3, 2, 3);
  add("T1", 1, 2, 3);  // one step: LSTMCell
  add("B1", 4, 1, 2);  // one sequence
  add("H1", 3, 2, 1);  // one unit: w_hh (4, 1)
  add("T5_B3_H2", 5, 3, 2);
  add("T2_B17_H3", 2, 17, 3);  // a batch whose step products run by columns (ops/recurrence.h)
  t.add("lstm_scan", "no_bias", {{3, 2, 12}, {12, 3}, {2, 3}, {2, 3}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{lstm_scan(x[0], x[1], Tensor(), x[2], x[3])};
        });
  // Gates of up to about +-20: sigmoid and tanh near their flat ends.
  t.add("lstm_scan", "saturating", {{3, 2, 8}, {8, 2}, {8}, {2, 2}, {2, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{lstm_scan(scale(x[0], 8.0), x[1], x[2], x[3], x[4])};
        });
}

// gru_scan's inputs gi (T, B, 3H), w_hh (3H, H), b_hh (3H), h0 (B, H).
void gru_scan_cases(Table& t) {
  const Function f = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{gru_scan(x[0], x[1], x[2], x[3])};
  };
  const auto add = [&](const char* name, int64_t T, int64_t B, int64_t H) {
    t.add("gru_scan", name, {{T, B, 3 * H}, {3 * H, H}, {3 * H}, {B, H}}, f);
  };
  add("T3_B2_H3", 3, 2, 3);
  add("T1", 1, 2, 3);  // one step: GRUCell
  add("B1", 4, 1, 2);  // one sequence
  add("H1", 3, 2, 1);  // one unit: w_hh (3, 1)
  add("T5_B3_H2", 5, 3, 2);
  add("T2_B17_H3", 2, 17, 3);  // a batch whose step products run by columns (ops/recurrence.h)
  t.add("gru_scan", "no_bias", {{3, 2, 9}, {9, 3}, {2, 3}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{gru_scan(x[0], x[1], Tensor(), x[2])};
        });
  // Gates of up to about +-20: sigmoid and tanh near their flat ends.
  t.add("gru_scan", "saturating", {{3, 2, 6}, {6, 2}, {6}, {2, 2}},
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{gru_scan(scale(x[0], 8.0), x[1], x[2], x[3])};
        });
}

}  // namespace

void elementwise_op_cases(Table& t) {
  unary_cases(t);
  binary_cases(t);
  rms_norm_cases(t);
  mask_cases(t);
  lstm_scan_cases(t);
  gru_scan_cases(t);
}

}  // namespace tg::detail
