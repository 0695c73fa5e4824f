// Op cases for mse_loss, l1_loss, nll_loss and binary_cross_entropy_with_logits, each with every
// reduction. Targets that get gradients are inputs; class weights, pos_weight and int64 targets
// are constants of the case.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

const std::pair<const char*, Reduction> kReductions[] = {
    {"mean", Reduction::mean}, {"sum", Reduction::sum}, {"none", Reduction::none}};

Function two(Fn2 f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
}

// A loss of input and target of one shape, at the shapes every such loss takes: 2-D, 1xN, Nx1,
// rank 0, 3 and 4; `s` names the reduction.
void same_shape_rows(Table& t, const char* op, const std::string& s, const Fn2& f) {
  t.binary(op, s + "_2d", {3, 4}, {3, 4}, f);
  t.binary(op, s + "_1xN", {1, 5}, {1, 5}, f);
  t.binary(op, s + "_Nx1", {4, 1}, {4, 1}, f);
  t.binary(op, s + "_rank0", {}, {}, f);
  t.binary(op, s + "_rank3", {2, 3, 2}, {2, 3, 2}, f);
  t.binary(op, s + "_rank4", {2, 1, 2, 3}, {2, 1, 2, 3}, f);
}

void regression_cases(Table& t) {
  for (const auto& [r, red] : kReductions) {
    const std::string s = r;
    auto mse = [red = red](const Tensor& x, const Tensor& y) { return mse_loss(x, y, red); };
    auto l1 = [red = red](const Tensor& x, const Tensor& y) { return l1_loss(x, y, red); };
    const std::pair<const char*, Fn2> ops[] = {{"mse_loss", mse}, {"l1_loss", l1}};
    for (const auto& [op, f] : ops) {
      same_shape_rows(t, op, s, f);
    }
    // l1 where x = y: the gradient 0 (PyTorch's sign(0)) is the central difference there too.
    t.add_inputs("l1_loss", s + "_equal_entries",
                 {from_vector({1, -2, 0.5, 3}, {2, 2}, Dtype::f64),
                  from_vector({1, -1, 0.5, 2}, {2, 2}, Dtype::f64)},
                 two([red = red](const Tensor& x, const Tensor& y) {
                   return mul(l1_loss(x, y, red), add(sum(x), scalar(1.0, x.dtype())));
                 }));
    t.first_order_only();
    t.binary("mse_loss", s + "_large", {2, 3}, {2, 3}, [red = red](const Tensor& x, const Tensor& y) {
      return mse_loss(scale(x, 100.0), y, red);
    });
  }
}

void bce_cases(Table& t) {
  for (const auto& [r, red] : kReductions) {
    const std::string s = r;
    // Targets in (0, 1) through sigmoid, so the check's steps stay inside.
    auto f = [red = red](const Tensor& x, const Tensor& y) {
      return binary_cross_entropy_with_logits(x, sigmoid(y), red);
    };
    const char* op = "binary_cross_entropy_with_logits";
    same_shape_rows(t, op, s, f);
    // Large logits (exp(-x) would overflow in the naive form).
    t.add_inputs(op, s + "_large_logits",
                 {from_vector({-800, -40, -3, 0, 2.5, 40, 800, 30}, {2, 4}, Dtype::f64),
                  from_vector({0.2, 0.9, 0.5, 0.1, 1, 0, 0.3, 0.7}, {2, 4}, Dtype::f64)},
                 two([red = red](const Tensor& x, const Tensor& y) {
                   return binary_cross_entropy_with_logits(x, y, red);
                 }));
    const Tensor pw = from_vector({0.5, 2.0, 3.0, 1.0}, {4}, Dtype::f64);
    t.binary(op, s + "_pos_weight", {3, 4}, {3, 4}, [pw, red = red](const Tensor& x, const Tensor& y) {
      return binary_cross_entropy_with_logits(x, sigmoid(y), {.pos_weight = as(pw, x), .reduction = red});
    });
  }
}

void nll_cases(Table& t) {
  // logp = log_softmax over the class axis: axis 1, or 0 for a (C,) input.
  auto nll = [](Tensor target, NllLossOptions o, int class_axis) {
    return [target, o, class_axis](const Tensor& x) {
      NllLossOptions p = o;
      if (o.weight.defined()) p.weight = as(o.weight, x);
      return nll_loss(log_softmax(x, class_axis), target, p);
    };
  };
  const Tensor w5 = from_vector({0.5, 2.0, 1.0, 0.25, 3.0}, {5}, Dtype::f64);
  for (const auto& [r, red] : kReductions) {
    const std::string s = r;
    const char* op = "nll_loss";
    t.unary(op, s + "_NC", {4, 5}, nll(from_indices({1, 0, 4, 2}, {4}), {.reduction = red}, 1));
    t.unary(op, s + "_NC_weight_ignore", {4, 5},
            nll(from_indices({1, -100, 4, 4}, {4}), {.weight = w5, .reduction = red}, 1));
    t.unary(op, s + "_NCd", {2, 5, 3},
            nll(from_indices({1, 0, 4, 2, 2, 3}, {2, 3}), {.ignore_index = 2, .reduction = red}, 1));
    t.unary(op, s + "_NCdd_weight", {2, 5, 1, 2},
            nll(from_indices({1, 0, 4, 3}, {2, 1, 2}), {.weight = w5, .reduction = red}, 1));
    t.unary(op, s + "_C", {5}, nll(from_indices({3}, {}), {.reduction = red}, 0));
    t.unary(op, s + "_1xC", {1, 5}, nll(from_indices({4}, {1}), {.reduction = red}, 1));
    // C = 1: raw scores, since a log_softmax over one class is the constant 0.
    t.unary(op, s + "_Nx1", {3, 1}, [red = red](const Tensor& x) {
      return nll_loss(x, from_indices({0, -100, 0}, {3}), {.reduction = red});
    });
  }
  // Raw scores as logp (nll_loss does not need normalised rows).
  t.unary("nll_loss", "raw_scores_sum", {3, 4}, [](const Tensor& x) {
    return nll_loss(x, from_indices({3, 0, 1}, {3}), {.reduction = Reduction::sum});
  });
}

}  // namespace

void loss_op_cases(Table& t) {
  regression_cases(t);
  bce_cases(t);
  nll_cases(t);
}

}  // namespace tg::detail
