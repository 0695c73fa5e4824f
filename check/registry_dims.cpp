// Op cases for the forms that take PyTorch's axis arguments: softmax(x, dim), log_softmax(x, dim),
// transpose(x, dim0, dim1), sum and mean over several dims, and cross_entropy on (..., V) logits
// with a class weight and label smoothing. Each form is its own op of the op list
// ("softmax_dim", ...), so every form is sure to have rows: 1xN, Nx1, non-square, every rank,
// negative dims, keepdim.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

void softmax_dim_cases(Table& t) {
  for (const char* op : {"softmax_dim", "log_softmax_dim"}) {
    const bool log = op[0] == 'l';
    auto f = [log](int dim) {
      return [log, dim](const Tensor& x) { return log ? log_softmax(x, dim) : softmax(x, dim); };
    };
    t.unary(op, "rank1_dim0", {5}, f(0));
    t.unary(op, "1xN_dim1", {1, 5}, f(1));
    t.unary(op, "Nx1_dim0", {5, 1}, f(0));
    t.unary(op, "non_square_dim0", {3, 5}, f(0));
    t.unary(op, "non_square_dim_minus2", {4, 3}, f(-2));
    t.unary(op, "rank3_dim0", {3, 2, 4}, f(0));
    t.unary(op, "rank3_dim1", {2, 3, 4}, f(1));
    t.unary(op, "rank3_dim_minus2", {2, 4, 3}, f(-2));
    t.unary(op, "rank4_dim1", {2, 3, 2, 2}, f(1));
    t.unary(op, "rank4_dim_minus3", {2, 2, 3, 2}, f(-3));
    t.unary(op, "rank4_dim_minus1", {1, 2, 2, 3}, f(-1));
    // Softmax over an axis of size 1 is the constant 1 (log_softmax: 0), so the gradient must be
    // exactly 0; times x (plus x) keeps the case non-vacuous while checking that zero.
    t.unary(op, log ? "1xN_dim0_plus_x" : "1xN_dim0_times_x", {1, 4},
            [f, log](const Tensor& x) { return log ? add(f(0)(x), x) : mul(f(0)(x), x); });
  }
  // Masked entries along axis 0, one column fully masked (zeros and zero gradient there);
  // log_softmax is looked at through exp, as its -inf entries have no finite differences.
  const Tensor M = from_vector({0, -kInf, 0, 0, -kInf, -kInf, -kInf, 0, 0, -kInf, -kInf, 0}, {3, 4}, Dtype::f64);
  t.unary("softmax_dim", "masked_columns_dim0", {3, 4},
          [M](const Tensor& x) { return softmax(add_mask(x, as(M, x)), 0); });
  t.unary("log_softmax_dim", "masked_columns_dim0_then_exp", {2, 3, 4},
          [M](const Tensor& x) { return exp(log_softmax(add_mask(x, as(M, x)), -2)); });
}

void transpose_dims_cases(Table& t) {
  auto tr = [](int a, int b) { return [a, b](const Tensor& x) { return transpose(x, a, b); }; };
  t.unary("transpose_dims", "2d_0_1", {3, 4}, tr(0, 1));
  t.unary("transpose_dims", "2d_minus1_minus2", {4, 3}, tr(-1, -2));
  t.unary("transpose_dims", "1xN", {1, 5}, tr(0, 1));
  t.unary("transpose_dims", "Nx1", {5, 1}, tr(1, 0));
  t.unary("transpose_dims", "rank1_same_dim", {4}, tr(0, 0));
  t.unary("transpose_dims", "rank3_0_1", {2, 3, 4}, tr(0, 1));
  t.unary("transpose_dims", "rank3_0_minus1", {2, 3, 4}, tr(0, -1));
  t.unary("transpose_dims", "rank4_1_2", {2, 3, 4, 2}, tr(1, 2));
  t.unary("transpose_dims", "rank4_minus4_2", {2, 1, 3, 2}, tr(-4, 2));
  t.unary("transpose_dims", "rank4_last_two", {1, 2, 3, 2}, tr(3, 2));
}

void sum_mean_dims_cases(Table& t) {
  for (const char* op : {"sum_dims", "mean_dims"}) {
    const bool is_mean = op[0] == 'm';
    auto f = [is_mean](std::vector<int> dims, bool keepdim) {
      return [=](const Tensor& x) { return is_mean ? mean(x, dims, keepdim) : sum(x, dims, keepdim); };
    };
    t.unary(op, "2d_both", {3, 4}, f({0, 1}, false));
    t.unary(op, "2d_both_keepdim", {3, 4}, f({1, 0}, true));
    t.unary(op, "1xN_both", {1, 5}, f({0, -1}, false));
    t.unary(op, "Nx1_one_in_list", {5, 1}, f({0}, true));
    t.unary(op, "empty_list_is_every_axis", {2, 3}, f({}, false));
    t.unary(op, "rank3_0_2", {2, 3, 4}, f({0, 2}, false));
    t.unary(op, "rank3_minus1_minus2_keepdim", {2, 3, 4}, f({-1, -2}, true));
    t.unary(op, "rank4_1_3", {2, 3, 2, 2}, f({1, 3}, false));
    t.unary(op, "rank4_0_2_3_keepdim", {2, 2, 3, 2}, f({0, 2, -1}, true));
    t.unary(op, "rank4_all_negative", {1, 2, 2, 3}, f({-4, -3, -2, -1}, false));
  }
}

void cross_entropy_options_cases(Table& t) {
  // Targets of the logits' leading shape; the weight and ignore_index as the case says.
  auto ce = [](std::vector<int64_t> targets, Shape ts, CrossEntropyOptions o) {
    const Tensor tt = from_indices(targets, ts);
    return [tt, o](const Tensor& x) {
      CrossEntropyOptions p = o;
      if (p.weight.defined()) p.weight = as(p.weight, x);
      return cross_entropy(x, tt, p);
    };
  };
  const Tensor w5 = from_vector({0.5, 2.0, 1.0, 0.25, 3.0}, {5}, Dtype::f64);
  const Tensor w3 = from_vector({1.5, 0.2, 1.0}, {3}, Dtype::f64);
  t.unary("cross_entropy_options", "BTV", {2, 3, 5}, ce({1, 0, 4, 2, 2, 3}, {2, 3}, {}));
  t.unary("cross_entropy_options", "BTV_ignore_minus1", {2, 3, 5},
          ce({1, -1, 4, 2, -1, 3}, {2, 3}, {.ignore_index = -1}));
  t.unary("cross_entropy_options", "BTV_default_ignore_minus100", {2, 2, 3},
          ce({1, -100, 0, 2}, {2, 2}, {}));
  t.unary("cross_entropy_options", "rank4", {2, 1, 2, 3}, ce({2, 0, -100, 1}, {2, 1, 2}, {}));
  t.unary("cross_entropy_options", "rank1_one_row", {4}, ce({3}, {}, {}));
  t.unary("cross_entropy_options", "1xV_weight", {1, 5}, ce({2}, {1}, {.weight = w5}));
  t.unary("cross_entropy_options", "Nx1_smoothing_plus_sum_of_squares", {4, 1},
          [f = ce({0, 0, -100, 0}, {4}, {.label_smoothing = 0.3})](const Tensor& x) {
            return add(f(x), sum_of_squares(x));  // V = 1: the loss is constant, its gradient 0
          });
  t.unary("cross_entropy_options", "weight", {4, 5},
          ce({1, 0, 4, 4}, {4}, {.weight = w5}));
  t.unary("cross_entropy_options", "weight_ignored", {2, 3, 3},
          ce({1, -1, 0, 2, 2, -1}, {2, 3}, {.weight = w3, .ignore_index = -1}));
  t.unary("cross_entropy_options", "smoothing", {3, 5},
          ce({1, 3, 0}, {3}, {.label_smoothing = 0.1}));
  t.unary("cross_entropy_options", "smoothing_one", {3, 5},
          ce({1, 3, 0}, {3}, {.label_smoothing = 1.0}));
  t.unary("cross_entropy_options", "smoothing_weight_ignored_BTV", {2, 3, 3},
          ce({2, 0, -1, 1, -1, 0}, {2, 3},
             {.weight = w3, .ignore_index = -1, .label_smoothing = 0.25}));
  t.unary("cross_entropy_options", "custom_ignore_in_range", {3, 5},
          ce({2, 4, 2}, {3}, {.weight = w5, .ignore_index = 2, .label_smoothing = 0.2}));
}

}  // namespace

void dims_op_cases(Table& t) {
  softmax_dim_cases(t);
  transpose_dims_cases(t);
  sum_mean_dims_cases(t);
  cross_entropy_options_cases(t);
}

}  // namespace tg::detail
