// Bad input as a table: each row does one bad thing and names the error type it must raise and
// fragments its message must hold (the op and the shapes). Then: a throw corrupts nothing.

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/ops.h>
#include "test_util.h"

namespace {

using tg::Tensor;
using V = std::vector<double>;

enum class Kind { Shape, Value, Graph };

struct BadCase {
  const char* name;
  std::function<void()> run;
  Kind kind;
  std::vector<std::string> fragments;  // each must appear in what()
};

const char* kind_name(Kind k) {
  return k == Kind::Shape ? "ShapeError" : k == Kind::Value ? "ValueError" : "GraphError";
}

bool is_kind(const tg::Error& e, Kind k) {
  switch (k) {
    case Kind::Shape: return dynamic_cast<const tg::ShapeError*>(&e) != nullptr;
    case Kind::Value: return dynamic_cast<const tg::ValueError*>(&e) != nullptr;
    case Kind::Graph: return dynamic_cast<const tg::GraphError*>(&e) != nullptr;
  }
  return false;
}

Tensor z(const tg::Shape& s, tg::Dtype d = tg::Dtype::f64) { return tg::zeros(s, d); }
Tensor g(const tg::Shape& s) { return tg::zeros(s).set_requires_grad(); }
constexpr tg::Dtype f32 = tg::Dtype::f32;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

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
      {"reshape_rank5", [] { tg::reshape(z({6}), {1, 1, 1, 1, 6}); }, Kind::Shape,
       {"reshape", "rank"}},
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
      // conv2d, conv1d
      {"conv2d_rank3", [] { tg::conv2d(z({3, 5, 5}), z({2, 3, 3, 3}), Tensor()); }, Kind::Shape,
       {"conv2d", "(N, C_in, H, W)", "(3, 5, 5)"}},
      {"conv2d_weight_rank", [] { tg::conv2d(z({1, 3, 5, 5}), z({2, 3, 3}), Tensor()); },
       Kind::Shape, {"conv2d", "weight", "(2, 3, 3)"}},
      {"conv2d_channels", [] { tg::conv2d(z({1, 4, 5, 5}), z({2, 3, 3, 3}), Tensor()); },
       Kind::Shape, {"conv2d", "channels do not match", "(1, 4, 5, 5)", "(2, 3, 3, 3)"}},
      {"conv2d_kernel_too_large", [] { tg::conv2d(z({1, 1, 3, 3}), z({1, 1, 5, 5}), Tensor()); },
       Kind::Shape, {"conv2d", "larger than the padded input", "(1, 1, 3, 3)", "(1, 1, 5, 5)"}},
      {"conv2d_dilated_kernel_too_large",
       [] { tg::conv2d(z({1, 1, 5, 5}), z({1, 1, 3, 3}), Tensor(), 1, 0, 3); }, Kind::Shape,
       {"conv2d", "larger than the padded input", "dilation (3, 3)", "dilated to 7"}},
      {"conv2d_groups_c_in", [] { tg::conv2d(z({1, 3, 5, 5}), z({2, 1, 3, 3}), Tensor(), 1, 0, 1, 2); },
       Kind::Shape, {"conv2d", "groups = 2", "C_in = 3", "(1, 3, 5, 5)"}},
      {"conv2d_groups_c_out", [] { tg::conv2d(z({1, 4, 5, 5}), z({3, 2, 3, 3}), Tensor(), 1, 0, 1, 2); },
       Kind::Shape, {"conv2d", "groups = 2", "C_out = 3", "(3, 2, 3, 3)"}},
      {"conv2d_groups_0", [] { tg::conv2d(z({1, 4, 5, 5}), z({2, 4, 3, 3}), Tensor(), 1, 0, 1, 0); },
       Kind::Value, {"conv2d", "groups", "0"}},
      {"conv2d_stride_0", [] { tg::conv2d(z({1, 1, 5, 5}), z({1, 1, 3, 3}), Tensor(), {0, 1}); },
       Kind::Value, {"conv2d", "stride", "(0, 1)"}},
      {"conv2d_dilation_0", [] { tg::conv2d(z({1, 1, 5, 5}), z({1, 1, 3, 3}), Tensor(), 1, 0, 0); },
       Kind::Value, {"conv2d", "dilation", "(0, 0)"}},
      {"conv2d_negative_padding",
       [] { tg::conv2d(z({1, 1, 5, 5}), z({1, 1, 3, 3}), Tensor(), 1, {1, -1}); }, Kind::Value,
       {"conv2d", "padding", "(1, -1)"}},
      {"conv2d_int64_input",
       [] { tg::conv2d(tg::from_indices(std::vector<int64_t>(9, 1), {1, 1, 3, 3}), z({1, 1, 2, 2}), Tensor()); },
       Kind::Value, {"conv2d", "int64", "(1, 1, 3, 3)"}},
      {"conv2d_int64_weight",
       [] { tg::conv2d(z({1, 1, 3, 3}), tg::from_indices({1, 1, 1, 1}, {1, 1, 2, 2}), Tensor()); },
       Kind::Value, {"conv2d", "weight", "int64", "(1, 1, 2, 2)"}},
      {"conv2d_dtypes", [] { tg::conv2d(z({1, 1, 3, 3}, f32), z({1, 1, 2, 2}), Tensor()); },
       Kind::Value, {"conv2d", "float32", "float64"}},
      {"conv2d_bias_shape", [] { tg::conv2d(z({1, 1, 3, 3}), z({2, 1, 2, 2}), z({3})); },
       Kind::Shape, {"conv2d", "bias", "(3,)", "(2, 1, 2, 2)"}},
      {"conv1d_rank4", [] { tg::conv1d(z({1, 2, 3, 4}), z({1, 2, 3}), Tensor()); }, Kind::Shape,
       {"conv1d", "(N, C_in, L)", "(1, 2, 3, 4)"}},
      {"conv1d_channels", [] { tg::conv1d(z({1, 2, 6}), z({1, 3, 3}), Tensor()); }, Kind::Shape,
       {"conv1d", "channels do not match", "(1, 2, 6)", "(1, 3, 3)"}},
      {"conv1d_kernel_too_large", [] { tg::conv1d(z({1, 1, 4}), z({1, 1, 5}), Tensor(), 1, 0); },
       Kind::Shape, {"conv1d", "larger than the padded input", "(1, 1, 4)", "(1, 1, 5)"}},
      {"conv1d_stride_0", [] { tg::conv1d(z({1, 1, 4}), z({1, 1, 2}), Tensor(), 0); }, Kind::Value,
       {"conv1d", "stride", "0"}},
      {"conv1d_groups", [] { tg::conv1d(z({1, 3, 4}), z({2, 1, 2}), Tensor(), 1, 0, 1, 2); },
       Kind::Shape, {"conv1d", "groups = 2", "C_in = 3"}},
      // the pools
      {"max_pool2d_rank3", [] { tg::max_pool2d(z({2, 4, 4}), 2); }, Kind::Shape,
       {"max_pool2d", "(N, C, H, W)", "(2, 4, 4)"}},
      {"max_pool2d_kernel_too_large", [] { tg::max_pool2d(z({1, 1, 3, 3}), 4); }, Kind::Shape,
       {"max_pool2d", "larger than the padded input", "(1, 1, 3, 3)"}},
      {"max_pool2d_padding_over_half", [] { tg::max_pool2d(z({1, 1, 4, 4}), 2, 1, {0, 2}); },
       Kind::Value, {"max_pool2d", "at most half", "(0, 2)", "(2, 2)"}},
      {"max_pool2d_negative_padding", [] { tg::max_pool2d(z({1, 1, 4, 4}), 2, 1, -1); },
       Kind::Value, {"max_pool2d", "padding", "(-1, -1)"}},
      {"max_pool2d_stride_0", [] { tg::max_pool2d(z({1, 1, 4, 4}), 2, 0); }, Kind::Value,
       {"max_pool2d", "stride", "(0, 0)", "(1, 1, 4, 4)"}},
      {"max_pool2d_kernel_0", [] { tg::max_pool2d(z({1, 1, 4, 4}), {0, 2}); }, Kind::Value,
       {"max_pool2d", "kernel", "(0, 2)"}},
      {"max_pool2d_int64",
       [] { tg::max_pool2d(tg::from_indices(std::vector<int64_t>(4, 0), {1, 1, 2, 2}), 2); },
       Kind::Value, {"max_pool2d", "int64", "(1, 1, 2, 2)"}},
      {"avg_pool2d_rank3", [] { tg::avg_pool2d(z({1, 4, 4}), 2); }, Kind::Shape,
       {"avg_pool2d", "(N, C, H, W)", "(1, 4, 4)"}},
      {"avg_pool2d_kernel_too_large", [] { tg::avg_pool2d(z({1, 1, 2, 5}), 3, 1, 0); },
       Kind::Shape, {"avg_pool2d", "larger than the padded input", "(1, 1, 2, 5)"}},
      {"avg_pool2d_padding_over_half", [] { tg::avg_pool2d(z({1, 1, 4, 4}), 3, 1, 2); },
       Kind::Value, {"avg_pool2d", "at most half"}},
      {"max_pool1d_rank4", [] { tg::max_pool1d(z({1, 1, 4, 4}), 2); }, Kind::Shape,
       {"max_pool1d", "(N, C, L)", "(1, 1, 4, 4)"}},
      {"max_pool1d_kernel_too_large", [] { tg::max_pool1d(z({1, 1, 3}), 4); }, Kind::Shape,
       {"max_pool1d", "larger than the padded input", "(1, 1, 3)"}},
      {"avg_pool1d_stride_0", [] { tg::avg_pool1d(z({1, 1, 4}), 2, 0); }, Kind::Value,
       {"avg_pool1d", "stride", "0"}},
      {"avg_pool1d_int64",
       [] { tg::avg_pool1d(tg::from_indices({0, 1, 2, 3}, {1, 1, 4}), 2); }, Kind::Value,
       {"avg_pool1d", "int64", "(1, 1, 4)"}},
      // broadcast_to, sum_to
      {"broadcast_to_mismatch", [] { tg::broadcast_to(z({2, 3}), {3, 3}); }, Kind::Shape,
       {"broadcast_to", "(2, 3)", "(3, 3)"}},
      {"broadcast_to_smaller", [] { tg::broadcast_to(z({2, 3}), {3}); }, Kind::Shape,
       {"broadcast_to", "(2, 3)", "(3,)"}},
      {"sum_to_mismatch", [] { tg::sum_to(z({2, 3}), {4}); }, Kind::Shape,
       {"sum_to", "(4,)", "(2, 3)"}},
      {"sum_to_larger", [] { tg::sum_to(z({3}), {2, 3}); }, Kind::Shape,
       {"sum_to", "(2, 3)", "(3,)"}},
      // the ops of the recurrent and Llama models
      {"sigmoid_int64", [] { tg::sigmoid(z({2, 3}, tg::Dtype::i64)); }, Kind::Value,
       {"sigmoid", "float32 or float64", "int64", "(2, 3)"}},
      {"silu_int64", [] { tg::silu(z({4}, tg::Dtype::i64)); }, Kind::Value, {"silu", "int64", "(4,)"}},
      {"softplus_beta_0", [] { tg::softplus(z({2, 3}), 0.0); }, Kind::Value,
       {"softplus", "beta", "(2, 3)"}},
      {"abs_int64", [] { tg::abs(z({3}, tg::Dtype::i64)); }, Kind::Value, {"abs", "int64", "(3,)"}},
      {"pow_int64", [] { tg::pow(z({2, 2}, tg::Dtype::i64), 2.0); }, Kind::Value,
       {"pow", "int64", "(2, 2)"}},
      {"clamp_lo_above_hi", [] { tg::clamp(z({2, 3}), 1.0, -1.0); }, Kind::Value,
       {"clamp", "lo <= hi", "lo = 1", "hi = -1", "(2, 3)"}},
      {"clamp_nan_bound", [] { tg::clamp(z({2}), kNan, 1.0); }, Kind::Value, {"clamp", "(2,)"}},
      {"maximum_no_broadcast", [] { tg::maximum(z({2, 3}), z({4})); }, Kind::Shape,
       {"maximum", "do not broadcast", "(2, 3)", "(4,)"}},
      {"minimum_no_broadcast", [] { tg::minimum(z({3, 1, 2}), z({3, 3})); }, Kind::Shape,
       {"minimum", "(3, 1, 2)", "(3, 3)"}},
      {"maximum_dtypes", [] { tg::maximum(z({2}, f32), z({2})); }, Kind::Value,
       {"maximum", "dtypes differ", "float32", "float64"}},
      {"minimum_int64", [] { tg::minimum(z({2}), z({2}, tg::Dtype::i64)); }, Kind::Value,
       {"minimum", "int64", "(2,)"}},
      {"rms_norm_weight_length", [] { tg::rms_norm(z({2, 4}), z({3}), 1e-6); }, Kind::Shape,
       {"rms_norm", "weight (3,)", "(4,)", "(2, 4)"}},
      {"rms_norm_weight_rank", [] { tg::rms_norm(z({2, 4}), z({1, 4}), 1e-6); }, Kind::Shape,
       {"rms_norm", "weight (1, 4)", "(2, 4)"}},
      {"rms_norm_rank0", [] { tg::rms_norm(z({}), Tensor(), 1e-6); }, Kind::Shape,
       {"rms_norm", "rank 1", "()"}},
      {"rms_norm_int64", [] { tg::rms_norm(z({2, 4}, tg::Dtype::i64), Tensor(), 1e-6); },
       Kind::Value, {"rms_norm", "int64", "(2, 4)"}},
      {"rms_norm_dtypes", [] { tg::rms_norm(z({2, 4}, f32), z({4}), 1e-6); }, Kind::Value,
       {"rms_norm", "dtypes differ", "(4,)", "(2, 4)"}},
      {"rms_norm_eps_negative", [] { tg::rms_norm(z({2, 4}), z({4}), -1.0); }, Kind::Value,
       {"rms_norm", "eps", "(2, 4)"}},
      {"batch_norm_rank1", [] { tg::batch_norm(z({4}), z({4}), z({4}), Tensor(), Tensor(), true); },
       Kind::Shape, {"batch_norm", "rank 2", "(4,)"}},
      {"batch_norm_weight_length",
       [] { tg::batch_norm(z({2, 3, 4}), Tensor(), Tensor(), z({4}), Tensor(), true); }, Kind::Shape,
       {"batch_norm", "weight (4,)", "(3,)", "(2, 3, 4)"}},
      {"batch_norm_running_var_shape",
       [] { tg::batch_norm(z({2, 3}), z({3}), z({1, 3}), Tensor(), Tensor(), true); }, Kind::Shape,
       {"batch_norm", "running_var (1, 3)", "(2, 3)"}},
      {"batch_norm_only_running_mean",
       [] { tg::batch_norm(z({2, 3}), z({3}), Tensor(), Tensor(), Tensor(), true); }, Kind::Value,
       {"batch_norm", "running_mean and running_var", "(2, 3)"}},
      {"batch_norm_eval_without_stats",
       [] { tg::batch_norm(z({2, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); },
       Kind::Value, {"batch_norm", "evaluation", "(2, 3)"}},
      {"batch_norm_one_value_per_channel",
       [] { tg::batch_norm(z({1, 3}), z({3}), z({3}), Tensor(), Tensor(), true); }, Kind::Value,
       {"batch_norm", "more than 1 value per channel", "(1, 3)"}},
      {"batch_norm_stat_requires_grad",
       [] {
         Tensor rm = z({3});
         rm.set_requires_grad();
         tg::batch_norm(z({2, 3}), rm, z({3}), Tensor(), Tensor(), true);
       },
       Kind::Value, {"batch_norm", "must not require grad", "(2, 3)"}},
      {"batch_norm_dtypes",
       [] { tg::batch_norm(z({2, 3}, f32), z({3}), z({3}), Tensor(), Tensor(), true); },
       Kind::Value, {"batch_norm", "running_mean", "dtypes differ", "float32", "float64"}},
      {"batch_norm_int64",
       [] { tg::batch_norm(z({2, 3}, tg::Dtype::i64), Tensor(), Tensor(), Tensor(), Tensor(), true); },
       Kind::Value, {"batch_norm", "int64", "(2, 3)"}},
      {"batch_norm_eps_negative",
       [] { tg::batch_norm(z({2, 3}), z({3}), z({3}), Tensor(), Tensor(), true, 0.1, -1.0); },
       Kind::Value, {"batch_norm", "eps", "(2, 3)"}},
      {"batch_norm_momentum_nan",
       [] { tg::batch_norm(z({2, 3}), z({3}), z({3}), Tensor(), Tensor(), true, kNan); },
       Kind::Value, {"batch_norm", "momentum", "(2, 3)"}},
      {"group_norm_not_divisible", [] { tg::group_norm(z({2, 6, 4}), 4, Tensor(), Tensor()); },
       Kind::Shape, {"group_norm", "6 channels", "4 groups", "(2, 6, 4)"}},
      {"group_norm_groups_0", [] { tg::group_norm(z({2, 6}), 0, Tensor(), Tensor()); }, Kind::Value,
       {"group_norm", "groups", "(2, 6)"}},
      {"group_norm_rank1", [] { tg::group_norm(z({6}), 2, Tensor(), Tensor()); }, Kind::Shape,
       {"group_norm", "rank 2", "(6,)"}},
      {"group_norm_bias_length", [] { tg::group_norm(z({2, 6, 3}), 2, Tensor(), z({3})); },
       Kind::Shape, {"group_norm", "bias (3,)", "(6,)", "(2, 6, 3)"}},
      {"group_norm_dtypes", [] { tg::group_norm(z({2, 4}, f32), 2, z({4}), Tensor()); },
       Kind::Value, {"group_norm", "dtypes differ", "float32", "float64"}},
      {"group_norm_eps_negative", [] { tg::group_norm(z({2, 4}), 2, Tensor(), Tensor(), -1.0); },
       Kind::Value, {"group_norm", "eps", "(2, 4)"}},
      {"mse_loss_shapes", [] { tg::mse_loss(z({2, 3}), z({3})); }, Kind::Shape,
       {"mse_loss", "input (2, 3)", "target (3,)", "same shape"}},
      {"mse_loss_int64", [] { tg::mse_loss(z({3}), z({3}, tg::Dtype::i64)); }, Kind::Value,
       {"mse_loss", "int64", "(3,)"}},
      {"l1_loss_shapes", [] { tg::l1_loss(z({4, 1}), z({1, 4})); }, Kind::Shape,
       {"l1_loss", "(4, 1)", "(1, 4)"}},
      {"l1_loss_dtypes", [] { tg::l1_loss(z({3}, f32), z({3})); }, Kind::Value,
       {"l1_loss", "dtypes differ"}},
      {"bce_logits_shapes", [] { tg::binary_cross_entropy_with_logits(z({2, 3}), z({2, 1})); },
       Kind::Shape, {"binary_cross_entropy_with_logits", "(2, 3)", "(2, 1)"}},
      {"bce_logits_int64", [] { tg::binary_cross_entropy_with_logits(z({2}, tg::Dtype::i64), z({2})); },
       Kind::Value, {"binary_cross_entropy_with_logits", "int64", "(2,)"}},
      {"bce_logits_pos_weight_shape",
       [] { tg::binary_cross_entropy_with_logits(z({2, 3}), z({2, 3}), {.pos_weight = z({2})}); },
       Kind::Shape, {"binary_cross_entropy_with_logits", "pos_weight (2,)", "(2, 3)"}},
      {"bce_logits_pos_weight_grad",
       [] { tg::binary_cross_entropy_with_logits(z({2, 3}), z({2, 3}), {.pos_weight = z({3}).set_requires_grad()}); },
       Kind::Value, {"binary_cross_entropy_with_logits", "pos_weight", "constant", "(2, 3)"}},
      {"nll_loss_target_shape", [] { tg::nll_loss(z({4, 5}), tg::from_indices({0, 1, 2}, {3})); },
       Kind::Shape, {"nll_loss", "logp (4, 5)", "target (3,)", "(4,)"}},
      {"nll_loss_target_shape_spatial",
       [] { tg::nll_loss(z({2, 5, 3}), tg::from_indices({0, 1, 2, 3, 4, 0}, {2, 1, 3})); },
       Kind::Shape, {"nll_loss", "(2, 5, 3)", "(2, 1, 3)", "(2, 3)"}},
      {"nll_loss_target_float", [] { tg::nll_loss(z({4, 5}), z({4})); }, Kind::Value,
       {"nll_loss", "target must be int64", "float64", "(4, 5)"}},
      {"nll_loss_logp_int64", [] { tg::nll_loss(z({4, 5}, tg::Dtype::i64), tg::from_indices({0, 1, 2, 3}, {4})); },
       Kind::Value, {"nll_loss", "logp", "int64", "(4, 5)"}},
      {"nll_loss_target_range", [] { tg::nll_loss(z({2, 5}), tg::from_indices({1, 5}, {2})); },
       Kind::Value, {"nll_loss", "target 5", "[0, 5)", "(2, 5)"}},
      {"nll_loss_weight_length",
       [] { tg::nll_loss(z({2, 5}), tg::from_indices({1, 0}, {2}), {.weight = z({4})}); },
       Kind::Shape, {"nll_loss", "weight (4,)", "(5,)", "(2, 5)"}},
      // the reductions along an axis, gather and scatter_add
      {"max_axis", [] { tg::max(z({2, 3}), 2); }, Kind::Shape, {"max", "axis 2", "(2, 3)"}},
      {"max_empty_axis", [] { tg::max(z({2, 0}), 1); }, Kind::Shape,
       {"max", "axis 1", "(2, 0)", "empty"}},
      {"max_int64", [] { tg::max(z({3}, tg::Dtype::i64), 0); }, Kind::Value, {"max", "int64", "(3,)"}},
      {"min_axis_rank0", [] { tg::min(z({}), 0); }, Kind::Shape, {"min", "()"}},
      {"argmax_axis", [] { tg::argmax(z({2, 3}), -3); }, Kind::Shape, {"argmax", "-3", "(2, 3)"}},
      {"argmin_empty", [] { tg::argmin(z({0, 2})); }, Kind::Shape, {"argmin", "empty"}},
      {"argmax_int64", [] { tg::argmax(z({4}, tg::Dtype::i64)); }, Kind::Value, {"argmax", "int64", "(4,)"}},
      {"amax_axis", [] { tg::amax(z({2, 3}), 3, true); }, Kind::Shape, {"amax", "axis 3", "(2, 3)"}},
      {"amin_empty_axis", [] { tg::amin(z({0, 3}), 0); }, Kind::Shape, {"amin", "(0, 3)", "empty"}},
      {"logsumexp_axis", [] { tg::logsumexp(z({4}), 1); }, Kind::Shape, {"logsumexp", "axis 1", "(4,)"}},
      {"logsumexp_int64", [] { tg::logsumexp(z({2, 2}, tg::Dtype::i64), 1); }, Kind::Value,
       {"logsumexp", "int64", "(2, 2)"}},
      {"var_axis", [] { tg::var(z({2, 3}), -3); }, Kind::Shape, {"var", "-3", "(2, 3)"}},
      {"var_negative_correction", [] { tg::var(z({2, 3}), 1, -1); }, Kind::Value,
       {"var", "correction", "(2, 3)"}},
      {"gather_index_rank", [] { tg::gather(z({2, 3}), 1, tg::from_indices({0, 1}, {2})); },
       Kind::Shape, {"gather", "rank", "index (2,)", "(2, 3)"}},
      {"gather_index_range", [] { tg::gather(z({2, 3}), 1, tg::from_indices({0, 3}, {2, 1})); },
       Kind::Shape, {"gather", "index 3", "(1, 0)", "axis 1", "size 3", "(2, 3)"}},
      {"gather_index_negative", [] { tg::gather(z({2, 3}), 0, tg::from_indices({-1}, {1, 1})); },
       Kind::Shape, {"gather", "index -1", "(2, 3)"}},
      {"gather_index_larger", [] { tg::gather(z({2, 3}), 1, tg::from_indices({0, 0, 0}, {3, 1})); },
       Kind::Shape, {"gather", "index (3, 1)", "larger", "(2, 3)", "dimension 0"}},
      {"gather_index_float", [] { tg::gather(z({2, 3}), 1, z({2, 3})); }, Kind::Value,
       {"gather", "index must be int64", "float64", "(2, 3)"}},
      {"gather_axis", [] { tg::gather(z({2, 3}), 2, tg::from_indices({0}, {1, 1})); }, Kind::Shape,
       {"gather", "axis 2", "(2, 3)"}},
      {"scatter_add_src_shape",
       [] { tg::scatter_add(z({2, 3}), 1, tg::from_indices({0, 1}, {2, 1}), z({2, 2})); },
       Kind::Shape, {"scatter_add", "src (2, 2)", "index (2, 1)", "(2, 3)"}},
      {"scatter_add_dtypes",
       [] { tg::scatter_add(z({2, 3}), 1, tg::from_indices({0, 1}, {2, 1}), z({2, 1}, f32)); },
       Kind::Value, {"scatter_add", "dtypes differ"}},
      {"scatter_add_index_range",
       [] { tg::scatter_add(z({2, 3}), 0, tg::from_indices({2, 0}, {1, 2}), z({1, 2})); },
       Kind::Shape, {"scatter_add", "index 2", "axis 0", "size 2"}},
      // the shape ops of the functional API
      {"stack_none", [] { tg::stack({}); }, Kind::Shape, {"stack", "at least one"}},
      {"stack_shapes", [] { tg::stack({z({2, 3}), z({3, 2})}); }, Kind::Shape,
       {"stack", "same shape", "(2, 3)", "(3, 2)"}},
      {"stack_axis", [] { tg::stack({z({2, 3}), z({2, 3})}, 3); }, Kind::Shape,
       {"stack", "axis 3", "[-3, 2]", "(2, 3)"}},
      {"stack_dtypes", [] { tg::stack({z({2}), z({2}, f32)}); }, Kind::Value, {"stack", "dtypes differ", "float32"}},
      {"chunk_zero", [] { tg::chunk(z({4, 2}), 0); }, Kind::Value, {"chunk", "at least 1", "(4, 2)"}},
      {"chunk_axis", [] { tg::chunk(z({4, 2}), 2, 2); }, Kind::Shape, {"chunk", "axis 2", "(4, 2)"}},
      {"squeeze_axis", [] { tg::squeeze(z({2, 1}), 2); }, Kind::Shape, {"squeeze", "axis 2", "(2, 1)"}},
      {"unsqueeze_axis", [] { tg::unsqueeze(z({2, 3}), -4); }, Kind::Shape,
       {"unsqueeze", "axis -4", "[-3, 2]", "(2, 3)"}},
      {"flatten_start_after_end", [] { tg::flatten(z({2, 3, 4}), 2, 1); }, Kind::Shape,
       {"flatten", "start 2", "end 1", "(2, 3, 4)"}},
      {"flatten_axis", [] { tg::flatten(z({2, 3}), 0, 2); }, Kind::Shape, {"flatten", "axis 2", "(2, 3)"}},
      {"expand_mismatch", [] { tg::expand(z({2, 3}), {4, 3}); }, Kind::Shape, {"expand", "(2, 3)", "(4, 3)"}},
      {"expand_minus1_new_axis", [] { tg::expand(z({3}), {-1, 3}); }, Kind::Shape,
       {"expand", "-1", "new axis", "(3,)"}},
      {"expand_fewer_sizes", [] { tg::expand(z({2, 3}), {3}); }, Kind::Shape,
       {"expand", "1 sizes", "(2, 3)", "rank 2"}},
      {"pad_odd", [] { tg::pad(z({2, 3}), {1, 2, 3}); }, Kind::Shape, {"pad", "(1, 2, 3)", "pairs", "(2, 3)"}},
      {"pad_too_many", [] { tg::pad(z({3}), {1, 1, 1, 1}); }, Kind::Shape, {"pad", "(1, 1, 1, 1)", "(3,)"}},
      {"pad_negative_size", [] { tg::pad(z({2, 3}), {-2, -2}); }, Kind::Shape,
       {"pad", "(-2, -2)", "axis 1", "(2, 3)", "size -1"}},
      {"pad_int64", [] { tg::pad(z({2}, tg::Dtype::i64), {1, 1}); }, Kind::Value, {"pad", "int64", "(2,)"}},
      {"index_select_rank2", [] { tg::index_select(z({2, 3}), 1, tg::from_indices({0, 1}, {1, 2})); },
       Kind::Shape, {"index_select", "rank 0 or 1", "(1, 2)", "(2, 3)"}},
      {"index_select_range", [] { tg::index_select(z({2, 3}), 0, tg::from_indices({0, 2}, {2})); },
       Kind::Shape, {"index_select", "index 2", "axis 0", "size 2", "(2, 3)"}},
      {"index_select_float_index", [] { tg::index_select(z({2, 3}), 0, z({2})); }, Kind::Value,
       {"index_select", "int64", "float64"}},
      {"index_select_axis", [] { tg::index_select(z({2, 3}), -3, tg::from_indices({0}, {1})); },
       Kind::Shape, {"index_select", "axis -3", "(2, 3)"}},
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
      // tensor access
      {"data_wrong_dtype", [] { z({2}).data<float>(); }, Kind::Value,
       {"data", "float64", "float32"}},
      {"item_non_scalar", [] { z({2, 3}).item(); }, Kind::Shape, {"item", "(2, 3)"}},
      {"at_out_of_range", [] { z({2, 3}).at({1, 3}); }, Kind::Shape, {"at", "(2, 3)"}},
      {"at_wrong_rank", [] { z({2, 3}).at({1}); }, Kind::Shape, {"at", "(2, 3)"}},
      {"size_bad_axis", [] { z({2, 3}).size(2); }, Kind::Shape, {"size", "axis 2", "(2, 3)"}},
      {"shape_rank5", [] { tg::Shape({1, 1, 1, 1, 1}); }, Kind::Shape, {"Shape", "rank 5"}},
      {"shape_negative", [] { tg::Shape({2, -1}); }, Kind::Shape, {"Shape", "negative"}},
      {"from_vector_count", [] { tg::from_vector({1, 2, 3}, {2, 2}); }, Kind::Shape,
       {"from_vector", "3", "(2, 2)"}},
      {"undefined_tensor", [] { Tensor().shape(); }, Kind::Value, {"undefined"}},
  };
  return cases;
}

TEST(BadInput, ThrowsTheRightErrorWithAClearMessage) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.name);
    try {
      c.run();
      ADD_FAILURE() << "no exception; expected " << kind_name(c.kind);
    } catch (const tg::Error& e) {
      EXPECT_TRUE(is_kind(e, c.kind)) << "expected " << kind_name(c.kind) << ", got: " << e.what();
      EXPECT_TRUE(dynamic_cast<const std::exception*>(&e) != nullptr);
      const std::string m = e.what();
      for (const std::string& f : c.fragments)
        EXPECT_NE(m.find(f), std::string::npos) << "'" << f << "' not in: " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a tg::Error: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "not a std::exception";
    }
  }
}

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
