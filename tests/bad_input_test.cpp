// Bad input as a table: each row does one bad thing and names the error type it must raise and
// fragments its message must hold (the op and the shapes). Then: a throw corrupts nothing. The
// ops of convolutional, recurrent and Llama models have their table in bad_input_ops_test.cpp.

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/check/functional.h>
#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/forward_ad.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "bad_input_util.h"
#include "test_util.h"

namespace {

using namespace tg::test::bad_input;  // the rows' vocabulary: BadCase, Kind, z, g, f32, kNan, kInf
using V = std::vector<double>;

// Functions for the functional API's rows.
std::vector<Tensor> nothing(const std::vector<Tensor>&) { return {}; }
std::vector<Tensor> doubled(const std::vector<Tensor>& x) { return {tg::scale(x[0], 2.0)}; }
std::vector<Tensor> sum_first(const std::vector<Tensor>& x) { return {tg::sum(tg::mul(x[0], x[0]))}; }
std::vector<Tensor> linear(const std::vector<Tensor>& x) { return {tg::sum(tg::scale(x[0], 3.0))}; }

const std::vector<BadCase>& bad_cases() {
  static const std::vector<BadCase> cases = {
      // matmul
      {"matmul_inner", [] { tg::matmul(z({3, 2}), z({3, 2})); }, Kind::Shape,
       {"matmul: inner dimensions differ", "(3, 2) @ (3, 2)"}},
      {"matmul_inner_transposed", [] { tg::matmul(z({3, 2}), z({2, 3}), true, false); },
       Kind::Shape, {"matmul", "(3, 2)^T @ (2, 3)"}},
      {"matmul_batch", [] { tg::matmul(z({2, 3, 4}), z({3, 4, 5})); }, Kind::Shape,
       {"matmul", "batch", "(2, 3, 4) @ (3, 4, 5)"}},
      {"matmul_rank1", [] { tg::matmul(z({3}), z({3, 2})); }, Kind::Shape,
       {"matmul", "rank", "(3,) @ (3, 2)"}},
      {"matmul_dtypes", [] { tg::matmul(z({2, 2}, f32), z({2, 2})); }, Kind::Value,
       {"matmul", "float32", "float64"}},
      // linear
      {"linear_in_features", [] { tg::linear(z({4, 3}), z({5, 2}), z({5})); }, Kind::Shape,
       {"linear", "in", "(4, 3)", "(5, 2)"}},
      {"linear_bias", [] { tg::linear(z({4, 3}), z({5, 3}), z({4})); }, Kind::Shape,
       {"linear", "bias", "(5, 3)", "(4,)"}},
      {"linear_bias_rank2", [] { tg::linear(z({4, 3}), z({5, 3}), z({1, 5})); }, Kind::Shape,
       {"linear", "bias", "(1, 5)"}},
      {"linear_weight_rank3", [] { tg::linear(z({4, 3}), z({1, 5, 3})); }, Kind::Shape,
       {"linear", "weight", "(out, in)", "(1, 5, 3)"}},
      {"linear_scalar_input", [] { tg::linear(z({}), z({5, 1})); }, Kind::Shape,
       {"linear", "input", "()"}},
      {"linear_dtypes", [] { tg::linear(z({2, 3}, f32), z({4, 3})); }, Kind::Value,
       {"linear", "float32", "float64"}},
      {"linear_bias_dtype", [] { tg::linear(z({2, 3}), z({4, 3}), z({4}, f32)); }, Kind::Value,
       {"linear", "float64", "float32"}},
      {"linear_no_weight", [] { tg::linear(z({2, 3}), Tensor()); }, Kind::Value,
       {"linear", "weight", "undefined"}},
      // elementwise
      {"add_no_broadcast", [] { tg::add(z({2, 3}), z({4})); }, Kind::Shape,
       {"add", "(2, 3)", "(4,)"}},
      {"sub_no_broadcast", [] { tg::sub(z({2, 3}), z({3, 2})); }, Kind::Shape,
       {"sub", "(2, 3)", "(3, 2)"}},
      {"mul_no_broadcast", [] { tg::mul(z({2, 3, 4}), z({2, 4})); }, Kind::Shape,
       {"mul", "(2, 3, 4)", "(2, 4)"}},
      {"add_dtypes", [] { tg::add(z({2}), z({2}, f32)); }, Kind::Value, {"add", "float32"}},
      {"mul_undefined", [] { tg::mul(z({2}), Tensor()); }, Kind::Value, {"mul", "undefined"}},
      // add_mask and causal_mask
      {"add_mask_no_broadcast", [] { tg::add_mask(z({2, 3}), z({3, 3})); }, Kind::Shape,
       {"add_mask", "(2, 3)", "(3, 3)"}},
      {"add_mask_grows_input", [] { tg::add_mask(z({3, 3}), z({2, 3, 3})); }, Kind::Shape,
       {"add_mask", "(2, 3, 3)", "(3, 3)"}},
      {"add_mask_nan", [] { tg::add_mask(z({2, 2}), tg::from_vector({0, kNan}, {2})); },
       Kind::Value, {"add_mask", "NaN"}},
      {"add_mask_plus_inf", [] { tg::add_mask(z({2, 2}), tg::from_vector({kInf, 0}, {2})); },
       Kind::Value, {"add_mask", "+inf"}},
      {"add_mask_requires_grad", [] { tg::add_mask(z({2, 2}), g({2, 2})); }, Kind::Value,
       {"add_mask", "(2, 2)", "require grad"}},
      {"add_mask_dtypes", [] { tg::add_mask(z({2, 2}), tg::causal_mask(2, f32)); }, Kind::Value,
       {"add_mask", "float32", "float64"}},
      {"causal_mask_negative_T", [] { tg::causal_mask(-1); }, Kind::Value, {"causal_mask", "-1"}},
      {"causal_mask_window", [] { tg::causal_mask(3, tg::Dtype::f64, -1); }, Kind::Value,
       {"causal_mask", "window"}},
      // reshape, permute, transpose
      {"reshape_count", [] { tg::reshape(z({2, 3}), {4}); }, Kind::Shape,
       {"reshape", "(2, 3)", "(4,)"}},
      {"reshape_two_inferred", [] { tg::reshape(z({2, 3}), {-1, -1}); }, Kind::Shape,
       {"reshape", "(-1, -1)"}},
      {"reshape_not_divisible", [] { tg::reshape(z({2, 3}), {4, -1}); }, Kind::Shape,
       {"reshape", "(2, 3)", "(4, -1)"}},
      {"reshape_rank7", [] { tg::reshape(z({6}), {1, 1, 1, 1, 1, 1, 6}); }, Kind::Shape,
       {"reshape", "(1, 1, 1, 1, 1, 1, 6)", "rank 7", "at most 6"}},
      {"reshape_rank7_inferred", [] { tg::reshape(z({2, 1, 1, 1, 1, 3}), {1, 2, 1, 1, 1, -1, 1}); },
       Kind::Shape, {"reshape", "(1, 2, 1, 1, 1, -1, 1)", "rank 7", "at most 6"}},
      {"permute_repeat", [] { tg::permute(z({2, 3, 4}), {0, 0, 1}); }, Kind::Shape,
       {"permute", "(0, 0, 1)", "(2, 3, 4)"}},
      {"permute_short", [] { tg::permute(z({2, 3, 4}), {1, 0}); }, Kind::Shape,
       {"permute", "(1, 0)", "(2, 3, 4)"}},
      {"permute_out_of_range", [] { tg::permute(z({2, 3}), {0, 2}); }, Kind::Shape,
       {"permute", "(0, 2)", "(2, 3)"}},
      {"transpose_rank1", [] { tg::transpose(z({3})); }, Kind::Shape, {"transpose", "(3,)"}},
      {"transpose_dim_out_of_range", [] { tg::transpose(z({2, 3}), 0, 2); }, Kind::Shape,
       {"transpose", "dim 2", "out of range", "(2, 3)"}},
      {"transpose_negative_dim", [] { tg::transpose(z({2, 3, 4}), -4, 0); }, Kind::Shape,
       {"transpose", "dim -4", "(2, 3, 4)", "[-3, 3)"}},
      // reductions, softmax, rope
      {"sum_axis", [] { tg::sum(z({2, 3}), 2); }, Kind::Shape, {"sum", "axis 2", "(2, 3)"}},
      {"sum_negative_axis", [] { tg::sum(z({2, 3}), -3); }, Kind::Shape, {"sum", "-3", "(2, 3)"}},
      {"sum_axis_rank0", [] { tg::sum(tg::scalar(1), 0); }, Kind::Shape, {"sum", "()"}},
      {"softmax_rank0", [] { tg::softmax(tg::scalar(1)); }, Kind::Shape, {"softmax", "()"}},
      {"softmax_dim", [] { tg::softmax(z({2, 3}), 2); }, Kind::Shape,
       {"softmax", "axis 2", "(2, 3)"}},
      {"softmax_negative_dim", [] { tg::softmax(z({2, 3}), -3); }, Kind::Shape,
       {"softmax", "axis -3", "(2, 3)"}},
      {"log_softmax_dim", [] { tg::log_softmax(z({2, 3, 4}), 3); }, Kind::Shape,
       {"log_softmax", "axis 3", "(2, 3, 4)"}},
      {"log_softmax_rank0_dim", [] { tg::log_softmax(tg::scalar(1), 0); }, Kind::Shape,
       {"log_softmax", "()"}},
      {"sum_dims_out_of_range", [] { tg::sum(z({2, 3}), {0, 2}); }, Kind::Shape,
       {"sum", "dim 2", "dims (0, 2)", "(2, 3)"}},
      {"sum_dims_negative", [] { tg::sum(z({2, 3}), {-3, 0}, true); }, Kind::Shape,
       {"sum", "dim -3", "(2, 3)"}},
      {"sum_dims_repeated", [] { tg::sum(z({2, 3}), {1, -1}); }, Kind::Shape,
       {"sum", "dim -1", "more than once", "dims (1, -1)", "(2, 3)"}},
      {"mean_dims_out_of_range", [] { tg::mean(z({2, 3, 4}), {1, 3}, true); }, Kind::Shape,
       {"mean", "dim 3", "dims (1, 3)", "(2, 3, 4)"}},
      {"mean_dims_repeated", [] { tg::mean(z({2, 3}), {0, 0}); }, Kind::Shape,
       {"mean", "more than once", "(2, 3)"}},
      {"mean_dims_int64", [] { tg::mean(tg::from_indices({1, 2}, {2}), {0, -1}); }, Kind::Value,
       {"mean", "int64", "(2,)"}},
      {"rope_rank1", [] { tg::rope(z({4})); }, Kind::Shape, {"rope", "(4,)"}},
      {"rope_odd", [] { tg::rope(z({2, 3})); }, Kind::Shape, {"rope", "(2, 3)"}},
      {"rope_base", [] { tg::rope(z({2, 2}), -1.0); }, Kind::Value, {"rope", "base"}},
      {"scale_undefined", [] { tg::scale(Tensor(), 2.0); }, Kind::Value, {"scale", "undefined"}},
      // causal_attention: the message says which axis differs
      {"causal_attention_T_differs",
       [] { tg::causal_attention(z({4, 2}), z({5, 2}), z({5, 2}), 1); }, Kind::Shape,
       {"causal_attention", "K must have Q's T = 4 rows on axis -2 (T), got 5",
        "(4, 2), (5, 2), (5, 2)"}},
      {"causal_attention_T_offset",
       [] { tg::causal_attention(z({2, 4, 2}), z({2, 5, 2}), z({2, 5, 2}), 1, 0, 2); },
       Kind::Shape, {"causal_attention", "query_offset + T = 2 + 4 = 6 rows", "got 5"}},
      {"causal_attention_batch_differs",
       [] { tg::causal_attention(z({2, 3, 4}), z({3, 3, 4}), z({3, 3, 4}), 1); }, Kind::Shape,
       {"causal_attention", "Q and K differ on axis -3: 2 and 3", "(2, 3, 4), (3, 3, 4)"}},
      {"causal_attention_d_differs",
       [] { tg::causal_attention(z({3, 4}), z({3, 5}), z({3, 4}), 1); }, Kind::Shape,
       {"causal_attention", "Q and K differ on axis -1 (d): 4 and 5"}},
      {"causal_attention_ranks_differ",
       [] { tg::causal_attention(z({2, 3, 4}), z({3, 4}), z({3, 4}), 1); }, Kind::Shape,
       {"causal_attention", "same rank", "ranks 3, 2 and 2"}},
      {"causal_attention_v_T_differs",
       [] { tg::causal_attention(z({3, 4}), z({3, 4}), z({2, 4}), 1); }, Kind::Shape,
       {"causal_attention", "V must share K's axis -2 (T), 3, got 2"}},
      {"causal_attention_qk",
       [] { tg::causal_attention(z({2, 3, 4}), z({2, 3, 5}), z({2, 3, 4}), 1); }, Kind::Shape,
       {"causal_attention", "(2, 3, 4)", "(2, 3, 5)"}},
      {"causal_attention_v", [] { tg::causal_attention(z({3, 4}), z({3, 4}), z({2, 4}), 1); },
       Kind::Shape, {"causal_attention", "(3, 4)", "(2, 4)"}},
      {"causal_attention_rank1", [] { tg::causal_attention(z({3}), z({3}), z({3}), 1); },
       Kind::Shape, {"causal_attention", "(3,)"}},
      {"causal_attention_dtypes",
       [] { tg::causal_attention(z({3, 4}), z({3, 4}, f32), z({3, 4}), 1); }, Kind::Value,
       {"causal_attention", "float32", "float64"}},
      {"causal_attention_window",
       [] { tg::causal_attention(z({3, 4}), z({3, 4}), z({3, 4}), 1, -1); }, Kind::Value,
       {"causal_attention", "window", "-1"}},
      {"causal_attention_heads_divide",
       [] { tg::causal_attention_heads(z({3, 6}), z({3, 6}), z({3, 6}), 4, 1); }, Kind::Shape,
       {"causal_attention_heads", "(3, 6)", "4 heads"}},
      {"causal_attention_heads_zero",
       [] { tg::causal_attention_heads(z({3, 6}), z({3, 6}), z({3, 6}), 0, 1); }, Kind::Value,
       {"causal_attention_heads", "heads", "0"}},
      {"causal_attention_heads_rank4",
       [] { tg::causal_attention_heads(z({1, 2, 3, 4}), z({1, 2, 3, 4}), z({1, 2, 3, 4}), 2, 1); },
       Kind::Shape, {"causal_attention_heads", "(1, 2, 3, 4)"}},
      {"causal_attention_heads_t",
       [] { tg::causal_attention_heads(z({2, 3, 4}), z({2, 3, 4}), z({2, 5, 4}), 2, 1); },
       Kind::Shape, {"causal_attention_heads", "(2, 5, 4)"}},
      {"causal_attention_heads_dtypes",
       [] { tg::causal_attention_heads(z({3, 4}), z({3, 4}), z({3, 4}, f32), 2, 1); },
       Kind::Value, {"causal_attention_heads", "float32", "float64"}},
      {"causal_attention_heads_window",
       [] { tg::causal_attention_heads(z({3, 4}), z({3, 4}), z({3, 4}), 2, 1, -2); },
       Kind::Value, {"causal_attention_heads", "window", "-2"}},
      {"causal_attention_qkv_divide",
       [] { tg::causal_attention_qkv(z({2, 3, 12}), 3, 1); }, Kind::Shape,
       {"causal_attention_qkv", "(2, 3, 12)", "3 heads"}},
      {"causal_attention_qkv_rank1", [] { tg::causal_attention_qkv(z({6}), 1, 1); }, Kind::Shape,
       {"causal_attention_qkv", "(6,)"}},
      {"causal_attention_qkv_rank4",
       [] { tg::causal_attention_qkv(z({1, 2, 3, 6}), 1, 1); }, Kind::Shape,
       {"causal_attention_qkv", "(1, 2, 3, 6)"}},
      {"causal_attention_qkv_zero", [] { tg::causal_attention_qkv(z({3, 6}), 0, 1); },
       Kind::Value, {"causal_attention_qkv", "heads", "0"}},
      {"causal_attention_qkv_int64",
       [] { tg::causal_attention_qkv(tg::from_indices({0, 1, 2, 3, 4, 5}, {2, 3}), 1, 1); },
       Kind::Value, {"causal_attention_qkv", "int64", "(2, 3)"}},
      {"causal_attention_qkv_window",
       [] { tg::causal_attention_qkv(z({3, 6}), 2, 1, -2); }, Kind::Value,
       {"causal_attention_qkv", "window", "-2"}},
      {"set_num_threads_0", [] { tg::set_num_threads(0); }, Kind::Value, {"set_num_threads", "0"}},
      // broadcast_to, sum_to
      {"broadcast_to_mismatch", [] { tg::broadcast_to(z({2, 3}), {3, 3}); }, Kind::Shape,
       {"broadcast_to", "(2, 3)", "(3, 3)"}},
      {"broadcast_to_smaller", [] { tg::broadcast_to(z({2, 3}), {3}); }, Kind::Shape,
       {"broadcast_to", "(2, 3)", "(3,)"}},
      {"sum_to_mismatch", [] { tg::sum_to(z({2, 3}), {4}); }, Kind::Shape,
       {"sum_to", "(4,)", "(2, 3)"}},
      {"sum_to_larger", [] { tg::sum_to(z({3}), {2, 3}); }, Kind::Shape,
       {"sum_to", "(2, 3)", "(3,)"}},
      // the tape
      {"backward_twice",
       [] {
         const Tensor y = tg::sum_of_squares(g({2}));
         y.backward();
         y.backward();
       },
       Kind::Graph, {"backward", "sum_of_squares", "freed", "retain_graph"}},
      {"backward_non_scalar", [] { tg::scale(g({2, 3}), 2.0).backward(); }, Kind::Graph,
       {"backward", "(2, 3)", "scalar", "grad_output"}},
      {"grad_output_shape", [] { tg::scale(g({2, 3}), 2.0).backward(z({3, 2})); }, Kind::Shape,
       {"backward", "grad_output", "(3, 2)", "(2, 3)"}},
      {"grad_output_dtype", [] { tg::scale(g({2, 3}), 2.0).backward(z({2, 3}, f32)); },
       Kind::Value, {"backward", "float32", "float64"}},
      {"backward_without_grad", [] { tg::sum_of_squares(z({2})).backward(); }, Kind::Graph,
       {"backward", "does not require grad"}},
      {"grad_input_without_grad", [] { tg::grad({tg::sum(g({2}))}, {z({2})}); }, Kind::Graph,
       {"grad", "(2,)", "does not require grad"}},
      {"set_requires_grad_int64", [] { tg::from_indices({0, 1}, {2}).set_requires_grad(); },
       Kind::Value, {"set_requires_grad", "int64", "(2,)"}},
      {"record_without_derivative",
       [] {
         const Tensor a = g({2});
         tg::sum(tg::Tensor(tg::record("mine", z({2}), {a}))).backward();
       },
       Kind::Graph, {"'mine'", "bad_input_test.cpp", "no derivative"}},
      {"record_nine_inputs",
       [] {
         const Tensor a = g({2});
         (void)tg::record("nine", z({2}), {a, a, a, a, a, a, a, a, a});
       },
       Kind::Graph, {"'nine'", "9 inputs", "at most 8"}},
      {"set_requires_grad_non_leaf", [] { tg::scale(g({2}), 2.0).set_requires_grad(); },
       Kind::Graph, {"set_requires_grad", "leaf", "scale"}},
      {"set_grad_shape", [] { z({2}).set_grad(z({3})); }, Kind::Shape,
       {"set_grad", "(3,)", "(2,)"}},
      // forward mode
      {"make_dual_outside_a_level", [] { tg::fwad::make_dual(z({2}), z({2})); }, Kind::Graph,
       {"make_dual", "DualLevel"}},
      {"make_dual_tangent_shape",
       [] {
         tg::fwad::DualLevel level;
         tg::fwad::make_dual(z({2}), z({3}));
       },
       Kind::Shape, {"make_dual", "(3,)", "(2,)"}},
      {"make_dual_tangent_dtype",
       [] {
         tg::fwad::DualLevel level;
         tg::fwad::make_dual(z({2}), z({2}, f32));
       },
       Kind::Value, {"make_dual", "float32", "float64"}},
      {"dual_level_nested",
       [] {
         tg::fwad::DualLevel level;
         tg::fwad::DualLevel inner;
       },
       Kind::Graph, {"DualLevel", "nested"}},
      {"jvp_tangent_shape", [] { tg::jvp(doubled, {z({2})}, {z({3})}); }, Kind::Shape,
       {"jvp", "v 0 of shape (3,)", "input 0 of shape (2,)"}},
      {"jvp_tangent_dtype", [] { tg::jvp(doubled, {z({2})}, {z({2}, f32)}); }, Kind::Value,
       {"jvp", "float32", "float64"}},
      {"jvp_no_outputs", [] { tg::jvp(nothing, {z({2})}, {z({2})}); }, Kind::Value,
       {"jvp", "no outputs"}},
      {"jvp_strict_constant_output",
       [] {
         tg::jvp([](const std::vector<Tensor>&) { return std::vector<Tensor>{z({2})}; }, {z({2})},
                 {z({2})}, {.strict = true});
       },
       Kind::Graph, {"jvp", "output 0", "(2,)", "strict"}},
      {"jacobian_forward_no_outputs", [] { tg::jacobian(nothing, {z({2})}, tg::JacobianMode::forward); },
       Kind::Value, {"jacobian", "no outputs"}},
      {"jvp_through_an_op_without_a_rule",
       [] {
         tg::jvp([](const std::vector<Tensor>& x) {
           return std::vector<Tensor>{tg::record("my_op", x[0].detach().clone(), {x[0]}).formula(
               [](const Tensor& dY) -> tg::Grads { return {dY}; })};
         }, {z({2})}, {z({2})});
       },
       Kind::Graph, {"'my_op'", "no tangent rule"}},
      // the functional API
      {"hessian_non_scalar", [] { tg::hessian(doubled, {z({3})}); }, Kind::Shape,
       {"hessian", "(3,)", "one element"}},
      {"hessian_two_outputs",
       [] {
         tg::hessian([](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0], x[0]}; },
                     {z({1})});
       },
       Kind::Value, {"hessian", "2 outputs"}},
      {"jacobian_no_outputs", [] { tg::jacobian(nothing, {z({2})}); }, Kind::Value,
       {"jacobian", "no outputs"}},
      {"vjp_no_outputs", [] { tg::vjp(nothing, {z({2})}, {z({2})}); }, Kind::Value,
       {"vjp", "no outputs"}},
      {"jacobian_no_inputs", [] { tg::jacobian(nothing, {}); }, Kind::Value,
       {"jacobian", "no inputs"}},
      {"vjp_cotangent_count", [] { tg::vjp(doubled, {z({2})}, {z({2}), z({2})}); }, Kind::Value,
       {"vjp", "2 vectors v", "1 output"}},
      {"vjp_cotangent_shape", [] { tg::vjp(doubled, {z({2})}, {z({3})}); }, Kind::Shape,
       {"vjp", "v 0 of shape (3,)", "output 0 of shape (2,)"}},
      {"vjp_cotangent_dtype", [] { tg::vjp(doubled, {z({2})}, {z({2}, f32)}); }, Kind::Value,
       {"vjp", "float32", "float64"}},
      {"vjp_without_cotangent", [] { tg::vjp(doubled, {z({2})}); }, Kind::Value,
       {"vjp", "one element", "(2,)"}},
      {"vjp_int64_input", [] { tg::vjp(doubled, {tg::from_indices({0, 1}, {2})}); }, Kind::Value,
       {"vjp", "input 0", "(2,)", "int64"}},
      {"jacobian_int64_output",
       [] {
         tg::jacobian([](const std::vector<Tensor>&) {
           return std::vector<Tensor>{tg::from_indices({0}, {1})};
         }, {z({2})});
       },
       Kind::Value, {"jacobian", "output 0", "int64"}},
      {"jacobian_rank", [] { tg::jacobian(doubled, {z({2, 2, 1, 2})}); }, Kind::Shape,
       {"jacobian", "(2, 2, 1, 2) + (2, 2, 1, 2)", "rank 8", "rank 6"}},
      {"vjp_strict_unused_input", [] { tg::vjp(sum_first, {z({2}), z({3})}, {}, {.strict = true}); },
       Kind::Graph, {"vjp", "input 1 of shape (3,)", "strict"}},
      {"jacobian_strict_unused_input",
       [] { tg::jacobian(sum_first, {z({2}), z({3})}, {.strict = true}); }, Kind::Graph,
       {"jacobian", "output 0", "input 1 of shape (3,)", "strict"}},
      {"jacobian_strict_constant_output",
       [] {
         tg::jacobian([](const std::vector<Tensor>&) { return std::vector<Tensor>{z({2})}; },
                      {z({2})}, {.strict = true});
       },
       Kind::Graph, {"jacobian", "output 0 of shape (2,)", "does not require grad"}},
      {"hessian_strict_linear", [] { tg::hessian(linear, {z({2})}, {.strict = true}); },
       Kind::Graph, {"hessian", "input 0 of shape (2,)", "linear"}},
      {"hvp_strict_linear", [] { tg::hvp(linear, {z({2})}, {z({2})}, {.strict = true}); },
       Kind::Graph, {"hvp", "input 0 of shape (2,)", "linear"}},
      {"hvp_v_shape", [] { tg::hvp(sum_first, {z({2})}, {z({3})}); }, Kind::Shape,
       {"hvp", "v 0 of shape (3,)", "input 0 of shape (2,)"}},
      {"vhp_v_count", [] { tg::vhp(sum_first, {z({2})}, {z({2}), z({2})}); }, Kind::Value,
       {"vhp", "2 vectors v", "1 input"}},
      {"vhp_non_scalar", [] { tg::vhp(doubled, {z({2})}, {z({2})}); }, Kind::Shape,
       {"vhp", "(2,)", "one element"}},
      {"hvp_without_v", [] { tg::hvp(sum_first, {z({2})}); }, Kind::Value,
       {"hvp", "one element", "(2,)"}},
      // checkpoint
      {"checkpoint_writes_its_input",
       [] {
         tg::checkpoint([](const std::vector<Tensor>& in) {
           Tensor t = in[0];
           t.data<double>()[0] = 1;
           return tg::mul(in[0], in[0]);
         }, {g({2, 3})});
       },
       Kind::Graph, {"checkpoint", "fn wrote into its input 0, of shape (2, 3), in place"}},
      {"checkpoint_input_changed_before_backward",
       [] {
         const Tensor x = g({2, 3}), s = z({2, 3});
         const Tensor y = tg::checkpoint([](const std::vector<Tensor>& in) { return tg::mul(in[0], in[1]); }, {x, s});
         Tensor(s).set({1, 2}, 3.0);
         tg::sum(y).backward();
       },
       Kind::Graph, {"checkpoint", "its input 1, of shape (2, 3), was modified in place since the forward"}},
      {"checkpoint_no_outputs",
       [] { tg::checkpoint(tg::CheckpointFn(nothing), {g({2})}); }, Kind::Value,
       {"checkpoint", "fn returned no tensor"}},
      {"checkpoint_output_dtypes",
       [] {
         tg::checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0], z({2}, f32)}; }, {g({2})});
       },
       Kind::Value, {"checkpoint", "float64 and float32", "share a dtype"}},
      // tensor access
      {"data_wrong_dtype", [] { z({2}).data<float>(); }, Kind::Value,
       {"data", "float64", "float32"}},
      {"item_non_scalar", [] { z({2, 3}).item(); }, Kind::Shape, {"item", "(2, 3)"}},
      {"at_out_of_range", [] { z({2, 3}).at({1, 3}); }, Kind::Shape, {"at", "(2, 3)"}},
      {"at_wrong_rank", [] { z({2, 3}).at({1}); }, Kind::Shape, {"at", "(2, 3)"}},
      {"size_bad_axis", [] { z({2, 3}).size(2); }, Kind::Shape, {"size", "axis 2", "(2, 3)"}},
      {"shape_rank7", [] { tg::Shape({1, 1, 2, 1, 1, 1, 3}); }, Kind::Shape,
       {"Shape", "(1, 1, 2, 1, 1, 1, 3)", "rank 7", "at most 6"}},
      {"shape_rank7_from_vector", [] { tg::Shape(std::vector<int64_t>(7, 1)); }, Kind::Shape,
       {"Shape", "rank 7", "at most 6"}},
      {"shape_negative", [] { tg::Shape({2, -1}); }, Kind::Shape, {"Shape", "negative"}},
      {"from_vector_count", [] { tg::from_vector({1, 2, 3}, {2, 2}); }, Kind::Shape,
       {"from_vector", "3", "(2, 2)"}},
      {"undefined_tensor", [] { Tensor().shape(); }, Kind::Value, {"undefined"}},
  };
  return cases;
}

TEST(BadInput, ThrowsTheRightErrorWithAClearMessage) { expect_bad_cases(bad_cases()); }

// Ranks that are equal are never blamed: the message names the axis that differs.
TEST(BadInput, AttentionShapeErrorsNameTheAxisNotTheRank) {
  const std::vector<std::function<void()>> equal_ranks = {
      [] { tg::causal_attention(z({4, 2}), z({5, 2}), z({5, 2}), 1); },
      [] { tg::causal_attention(z({2, 3, 4}), z({3, 3, 4}), z({3, 3, 4}), 1); },
      [] { tg::causal_attention(z({3, 4}), z({3, 4}), z({2, 4}), 1); },
      [] { tg::causal_attention_heads(z({2, 3, 4}), z({2, 3, 4}), z({2, 5, 4}), 2, 1); }};
  for (std::size_t i = 0; i < equal_ranks.size(); ++i) {
    SCOPED_TRACE(i);
    try {
      equal_ranks[i]();
      ADD_FAILURE() << "no exception";
    } catch (const tg::ShapeError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find("rank"), std::string::npos) << m;
      EXPECT_NE(m.find("axis -"), std::string::npos) << m;
    }
  }
}

TEST(BadInput, ErrorsAreStandardExceptionsToo) {
  EXPECT_THROW(tg::matmul(z({3, 2}), z({3, 2})), std::invalid_argument);
  EXPECT_THROW(tg::add_mask(z({2}), tg::from_vector({kNan}, {1})), std::invalid_argument);
  EXPECT_THROW(tg::sum_of_squares(z({2})).backward(), std::runtime_error);
}

TEST(BadInput, ThrowingOpsLeaveTensorsAndGradsUnchanged) {
  const Tensor x = tg::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  const Tensor w = tg::from_vector({1, -1, 2}, {3});
  tg::sum_of_squares(tg::mul(x, w)).backward();  // dx = 2 x w^2
  const V grad = {2, 4, 24, 8, 10, 48}, value = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(x.grad().to_vector(), grad);
  EXPECT_THROW(tg::matmul(x, x), tg::ShapeError);
  EXPECT_THROW(tg::add(x, z({2})), tg::ShapeError);
  EXPECT_THROW(tg::add_mask(x, tg::from_vector({0, kNan, 0}, {3})), tg::ValueError);
  EXPECT_THROW(tg::reshape(x, {4}), tg::ShapeError);
  EXPECT_THROW(tg::mul(x, w).backward(), tg::GraphError);
  EXPECT_THROW(tg::mul(x, w).backward(z({3, 2})), tg::ShapeError);
  EXPECT_EQ(x.to_vector(), value);
  EXPECT_EQ(w.to_vector(), V({1, -1, 2}));
  EXPECT_EQ(x.grad().to_vector(), grad);
  EXPECT_FALSE(w.grad().defined());
  // The tape still works afterwards.
  tg::sum_of_squares(tg::mul(x, w)).backward();
  EXPECT_EQ(x.grad().to_vector(), V({4, 8, 48, 16, 20, 96}));
}

// A backward that fails halfway (an op returning a gradient of the wrong shape) commits nothing.
TEST(BadInput, FailedBackwardLeavesGradsUnchanged) {
  const Tensor x = tg::from_vector({1, 2}, {2}).set_requires_grad();
  tg::sum_of_squares(x).backward();
  const Tensor bad = tg::record("bad_shape", tg::scale(x.detach(), 2.0), {x}).formula([](const Tensor&) -> tg::Grads { return {tg::zeros({3})}; });
  // x reaches the loss twice: directly (a good gradient) and through the bad op.
  const Tensor L = tg::add(tg::sum_of_squares(x), tg::sum_of_squares(bad));
  tg::test::expect_throws<tg::GraphError>([&] { L.backward(); }, {"bad_shape", "(3,)", "(2,)"});
  EXPECT_EQ(x.grad().to_vector(), V({2, 4}));
}

}  // namespace
