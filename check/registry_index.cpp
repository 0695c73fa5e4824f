// Op cases for cross_entropy, embedding, narrow, split, cat, dropout. Indices and targets are
// int64 constants captured by the case; dropout cases seed their own Rng inside the function, so
// every evaluation (each finite-difference step) draws the same mask.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

std::vector<Tensor> only(Tensor y) { return {std::move(y)}; }

void cross_entropy_cases(Table& t) {
  // nanoGPT's ignore_index -1, as the GPT passes it (the default -100 has rows of its own,
  // check/registry_dims.cpp).
  auto ce = [](std::vector<int64_t> targets, int64_t ignore_index = -1) {
    const Tensor tt = from_indices(targets, {static_cast<int64_t>(targets.size())});
    return [tt, ignore_index](const Tensor& x) { return cross_entropy(x, tt, ignore_index); };
  };
  t.unary("cross_entropy", "basic", {4, 5}, ce({1, 0, 4, 2}));
  t.unary("cross_entropy", "some_ignored", {5, 3}, ce({2, -1, 0, -1, 1}));
  t.unary("cross_entropy", "custom_ignore_index", {4, 3}, ce({2, 0, 2, 1}, 2));
  t.unary("cross_entropy", "N1", {1, 4}, ce({3}));
  t.unary("cross_entropy", "repeated_targets", {3, 2}, ce({1, 1, 1}));
  // With V = 1 the loss is the constant 0, so its gradient must be exactly zero; the added
  // sum of squares keeps the case non-vacuous while still checking that zero.
  const Tensor t0 = from_indices({0, 0, -1}, {3});
  t.unary("cross_entropy", "V1_plus_sum_of_squares", {3, 1},
          [t0](const Tensor& x) { return add(cross_entropy(x, t0, -1), sum_of_squares(x)); });
  t.add_inputs("cross_entropy", "logits_1e4",
               {from_vector({1e4, 1e4 - 0.7, -1e4, 1e4 + 0.3,  //
                             -1e4, -1e4 + 1.2, -1e4 - 0.4, -1e4 + 0.1},
                            {2, 4}, Dtype::f64)},
               [tt = from_indices({1, 0}, {2})](const std::vector<Tensor>& x) {
                 return only(cross_entropy(x[0], tt));
               });
}

void embedding_cases(Table& t) {
  auto emb = [](std::vector<int64_t> idx, Shape s) {
    const Tensor it = from_indices(idx, s);
    return [it](const Tensor& w) { return embedding(it, w); };
  };
  t.unary("embedding", "repeated_indices", {4, 3}, emb({1, 3, 1, 0, 3, 1}, {6}));
  t.unary("embedding", "rank2_indices", {5, 4}, emb({4, 0, 2, 2, 1, 4}, {2, 3}));
  t.unary("embedding", "rank3_indices_to_rank4", {3, 2}, emb({0, 2, 2, 1, 0, 0, 1, 2}, {2, 2, 2}));
  t.unary("embedding", "rank0_index", {3, 4}, emb({2}, {}));
  t.unary("embedding", "C1", {4, 1}, emb({3, 0, 3}, {3}));
  // Two lookups multiplied: the second derivative runs embedding_backward's own derivative.
  const Tensor i1 = from_indices({0, 2, 2, 1}, {2, 2}), i2 = from_indices({2, 2, 0, 1}, {2, 2});
  t.unary("embedding", "product_of_two_lookups", {3, 2},
          [i1, i2](const Tensor& w) { return mul(embedding(i1, w), embedding(i2, w)); });
}

void narrow_split_cat_cases(Table& t) {
  auto nar = [](int axis, int64_t start, int64_t length) {
    return [=](const Tensor& x) { return narrow(x, axis, start, length); };
  };
  t.unary("narrow", "rank3_axis0", {3, 2, 4}, nar(0, 1, 2));
  t.unary("narrow", "rank3_axis1", {2, 3, 4}, nar(1, 0, 2));
  t.unary("narrow", "rank3_axis_minus1", {2, 3, 4}, nar(-1, 1, 2));
  t.unary("narrow", "rank4_axis0", {3, 2, 2, 2}, nar(0, 2, 1));
  t.unary("narrow", "rank4_axis1", {2, 3, 2, 2}, nar(1, 1, 1));
  t.unary("narrow", "rank4_axis2", {2, 2, 4, 2}, nar(2, 1, 3));
  t.unary("narrow", "rank4_axis3", {2, 2, 2, 5}, nar(3, 0, 4));
  t.unary("narrow", "whole_axis", {2, 3}, nar(1, 0, 3));
  // The narrowed values squared: the second derivative goes through narrow's own derivative.
  t.unary("narrow", "squared", {4, 3},
          [](const Tensor& x) { const Tensor y = narrow(x, 0, 1, 2); return mul(y, y); });

  auto spl = [](int64_t size, int axis) {
    return [=](const std::vector<Tensor>& x) { return split(x[0], size, axis); };
  };
  t.add("split", "uneven_last_piece", {{2, 7}}, spl(3, 1));
  t.add("split", "rank3_axis0_uneven", {{5, 2, 2}}, spl(2, 0));
  t.add("split", "even_rank4_axis2", {{2, 1, 4, 2}}, spl(2, 2));
  t.add("split", "one_piece", {{2, 3}}, spl(5, -1));

  auto ct = [](int axis) {
    return [=](const std::vector<Tensor>& x) { return only(cat(x, axis)); };
  };
  t.add("cat", "two_axis0", {{2, 3}, {1, 3}}, ct(0));
  t.add("cat", "two_rank3_axis_minus1", {{2, 2, 1}, {2, 2, 3}}, ct(-1));
  t.add("cat", "six_axis1_rank3",
        {{2, 1, 3}, {2, 2, 3}, {2, 1, 3}, {2, 3, 3}, {2, 1, 3}, {2, 2, 3}}, ct(1));
  t.add("cat", "six_axis0", {{1, 2}, {2, 2}, {1, 2}, {1, 2}, {3, 2}, {1, 2}}, ct(0));
  t.add("cat", "three_rank4_axis3", {{1, 2, 2, 1}, {1, 2, 2, 2}, {1, 2, 2, 1}}, ct(3));
  // One input twice: its two slices of the gradient must add up.
  t.unary("cat", "same_input_twice", {2, 2}, [](const Tensor& x) { return cat({x, x}, 1); });
}

void dropout_cases(Table& t) {
  auto drop = [](double p, uint64_t seed) {
    return [=](const Tensor& x) {
      Rng rng(seed);
      return dropout(x, p, true, rng);
    };
  };
  t.unary("dropout", "p0.5", {4, 5}, drop(0.5, 7));
  t.unary("dropout", "p0.2_rank3", {2, 3, 4}, drop(0.2, 8));
  // The kept entries squared: a second derivative that depends on the mask.
  t.unary("dropout", "p0.5_squared", {3, 4}, [](const Tensor& x) {
    Rng rng(9);
    const Tensor y = dropout(x, 0.5, true, rng);
    return mul(y, y);
  });
}

}  // namespace

void index_op_cases(Table& t) {
  cross_entropy_cases(t);
  embedding_cases(t);
  narrow_split_cat_cases(t);
  dropout_cases(t);
}

}  // namespace tg::detail
