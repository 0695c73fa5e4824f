// The index ops (cross_entropy, embedding, cat, narrow, split, dropout) on bad inputs: a table
// of rows, each the error type and the fragments its message must hold (the op and the shapes).

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;

enum class Kind { Shape, Value };

struct BadCase {
  const char* name;
  std::function<void()> run;
  Kind kind;
  std::vector<std::string> fragments;  // each must appear in what()
};

Tensor z(const tg::Shape& s, tg::Dtype d = tg::Dtype::f64) { return tg::zeros(s, d); }
Tensor ix(std::vector<int64_t> v) { return tg::from_indices(v, {static_cast<int64_t>(v.size())}); }

const std::vector<BadCase>& bad_cases() {
  static tg::Rng rng(0);
  static const std::vector<BadCase> cases = {
      {"ce_float_targets", [] { tg::cross_entropy(z({2, 3}), z({2})); }, Kind::Value,
       {"cross_entropy", "int64", "float64", "(2, 3)", "(2,)"}},
      {"ce_target_too_big", [] { tg::cross_entropy(z({2, 3}), ix({0, 3})); }, Kind::Value,
       {"cross_entropy", "target 3", "[0, 3)", "(2, 3)"}},
      {"ce_target_negative", [] { tg::cross_entropy(z({2, 3}), ix({-2, 0})); }, Kind::Value,
       {"cross_entropy", "target -2", "ignore_index -100"}},
      {"ce_ignore_index_not_minus_one", [] { tg::cross_entropy(z({2, 3}), ix({-1, 0}), 5); },
       Kind::Value, {"cross_entropy", "target -1", "ignore_index 5"}},
      {"ce_targets_rank_for_BTV", [] { tg::cross_entropy(z({2, 3, 4}), ix({0, 1})); },
       Kind::Shape, {"cross_entropy", "rank 2, got rank 1", "(2, 3, 4)", "(2,)"}},
      {"ce_targets_shape_for_BTV",
       [] { tg::cross_entropy(z({2, 3, 5}), tg::from_indices({0, 1, 2, 3, 4, 0, 1, 2}, {2, 4})); },
       Kind::Shape, {"cross_entropy", "axis 1 differs, 3 in the logits and 4", "(2, 3, 5)", "(2, 4)"}},
      {"ce_logits_rank0", [] { tg::cross_entropy(tg::scalar(1.0), tg::from_indices({0}, {})); },
       Kind::Shape, {"cross_entropy", "class axis", "()"}},
      {"ce_weight_length",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.weight = z({4})}); }, Kind::Shape,
       {"cross_entropy", "weight must be (V,) = (3,)", "(2, 3)", "weight (4,)"}},
      {"ce_weight_rank2",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.weight = z({1, 3})}); }, Kind::Shape,
       {"cross_entropy", "weight", "(1, 3)"}},
      {"ce_weight_dtype",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.weight = z({3}, tg::Dtype::f32)}); },
       Kind::Value, {"cross_entropy", "weight", "float64", "float32", "(3,)"}},
      {"ce_weight_requires_grad",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.weight = z({3}).set_requires_grad()}); },
       Kind::Value, {"cross_entropy", "weight is a constant", "(2, 3)"}},
      {"ce_label_smoothing_negative",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.label_smoothing = -0.1}); }, Kind::Value,
       {"cross_entropy", "label_smoothing must be in [0, 1]", "-0.1", "(2, 3)"}},
      {"ce_label_smoothing_above_one",
       [] { tg::cross_entropy(z({2, 3}), ix({0, 1}), {.label_smoothing = 1.5}); }, Kind::Value,
       {"cross_entropy", "label_smoothing", "1.5"}},
      {"ce_label_smoothing_nan",
       [] {
         tg::cross_entropy(z({2, 3}), ix({0, 1}),
                           {.label_smoothing = std::numeric_limits<double>::quiet_NaN()});
       },
       Kind::Value, {"cross_entropy", "label_smoothing", "nan"}},
      {"ce_target_outside_BTV",
       [] { tg::cross_entropy(z({1, 2, 3}), tg::from_indices({0, 3}, {1, 2}), -1); }, Kind::Value,
       {"cross_entropy", "target 3 at position 1", "[0, 3)", "ignore_index -1", "(1, 2, 3)"}},
      {"ce_targets_rank2", [] { tg::cross_entropy(z({2, 3}), tg::from_indices({0, 1}, {2, 1})); },
       Kind::Shape, {"cross_entropy", "(2, 1)"}},
      {"ce_N_differs", [] { tg::cross_entropy(z({2, 3}), ix({0, 1, 2})); }, Kind::Shape,
       {"cross_entropy", "axis 0 differs, 2 in the logits and 3", "(2, 3)", "(3,)"}},
      {"ce_int_logits", [] { tg::cross_entropy(ix({0, 1}), ix({0, 1})); }, Kind::Value,
       {"cross_entropy", "logits", "int64"}},
      {"embedding_float_indices", [] { tg::embedding(z({3}), z({4, 2})); }, Kind::Value,
       {"embedding", "int64", "float64", "(3,)"}},
      {"embedding_index_too_big", [] { tg::embedding(ix({0, 4}), z({4, 2})); }, Kind::Value,
       {"embedding", "index 4", "[0, 4)", "(4, 2)"}},
      {"embedding_index_negative", [] { tg::embedding(ix({-1}), z({4, 2})); }, Kind::Value,
       {"embedding", "index -1", "(4, 2)"}},
      {"embedding_weight_rank3", [] { tg::embedding(ix({0}), z({4, 2, 1})); }, Kind::Shape,
       {"embedding", "(V, C)", "(4, 2, 1)"}},
      {"embedding_result_rank7",
       [] { tg::embedding(tg::from_indices({0}, {1, 1, 1, 1, 1, 1}), z({4, 2})); }, Kind::Shape,
       {"embedding", "(1, 1, 1, 1, 1, 1)", "rank 7", "at most 6"}},
      {"embedding_int_weight", [] { tg::embedding(ix({0}), tg::from_indices({1, 2}, {1, 2})); },
       Kind::Value, {"embedding", "weight", "int64", "(1, 2)"}},
      {"cat_no_tensors", [] { tg::cat({}, 0); }, Kind::Shape, {"cat", "at least one"}},
      {"cat_shapes_differ", [] { tg::cat({z({2, 3}), z({3, 2})}, 0); }, Kind::Shape,
       {"cat", "axis 0", "(2, 3)", "(3, 2)"}},
      {"cat_ranks_differ", [] { tg::cat({z({2, 3}), z({2, 3, 1})}, 1); }, Kind::Shape,
       {"cat", "(2, 3)", "(2, 3, 1)"}},
      {"cat_dtypes_differ", [] { tg::cat({z({2, 3}), z({2, 3}, tg::Dtype::f32)}, 0); },
       Kind::Value, {"cat", "dtypes", "float64", "float32"}},
      {"cat_bad_axis", [] { tg::cat({z({2, 3}), z({2, 3})}, 2); }, Kind::Shape, {"cat", "(2, 3)"}},
      {"cat_many_shapes_differ", [] { tg::cat({z({1}), z({1}), z({1}), z({1}), z({1, 1})}, 0); },
       Kind::Shape, {"cat", "(1, 1)"}},
      {"narrow_past_end", [] { tg::narrow(z({2, 3}), 1, 2, 2); }, Kind::Shape,
       {"narrow", "[2, 2 + 2)", "axis 1", "(2, 3)"}},
      {"narrow_negative_start", [] { tg::narrow(z({2, 3}), 0, -1, 1); }, Kind::Shape,
       {"narrow", "(2, 3)"}},
      {"narrow_negative_length", [] { tg::narrow(z({2, 3}), 0, 1, -1); }, Kind::Shape,
       {"narrow", "(2, 3)"}},
      {"narrow_bad_axis", [] { tg::narrow(z({2, 3}), 2, 0, 1); }, Kind::Shape,
       {"narrow", "(2, 3)"}},
      {"split_size_zero", [] { tg::split(z({2, 3}), 0, 1); }, Kind::Value,
       {"split", "size", "(2, 3)"}},
      {"split_bad_axis", [] { tg::split(z({2, 3}), 1, -3); }, Kind::Shape, {"split", "(2, 3)"}},
      {"dropout_p_above_one", [] { tg::dropout(z({2, 3}), 1.5, true, rng); }, Kind::Value,
       {"dropout", "p", "1.5", "(2, 3)"}},
      {"dropout_p_negative", [] { tg::dropout(z({2, 3}), -0.1, false, rng); }, Kind::Value,
       {"dropout", "p", "(2, 3)"}},
      {"dropout_p_nan",
       [] { tg::dropout(z({2}), std::numeric_limits<double>::quiet_NaN(), true, rng); },
       Kind::Value, {"dropout", "nan"}},
      {"dropout_int", [] { tg::dropout(ix({1, 2}), 0.5, true, rng); }, Kind::Value,
       {"dropout", "int64", "(2,)"}},
  };
  return cases;
}

class IndexOpsBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(IndexOpsBadInput, ThrowsTheRightErrorNamingOpAndShapes) {
  const BadCase& c = GetParam();
  if (c.kind == Kind::Shape)
    tg::test::expect_throws<tg::ShapeError>(c.run, c.fragments);
  else
    tg::test::expect_throws<tg::ValueError>(c.run, c.fragments);
}

INSTANTIATE_TEST_SUITE_P(Table, IndexOpsBadInput, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
