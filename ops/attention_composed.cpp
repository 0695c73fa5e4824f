// The composed causal attention; the math is at the top of ops/attention_composed.h.

#include <tapegrad/ops/attention_composed.h>

#include <string>

#include <tapegrad/ops/add_mask.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/permute.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/scale.h>
#include <tapegrad/ops/softmax.h>

namespace tg {

AttentionWeights causal_attention_weights(const Tensor& Q, const Tensor& K, double sc,
                                          int64_t window, int64_t query_offset) {
  AttentionWeights w;
  w.S = scale(matmul(Q, K, false, true), sc);  // (.., T, T_k)
  const Tensor M = causal_mask(Q.size(-2), Q.dtype(), window, query_offset);  // (T, T_k)
  w.A = softmax(add_mask(w.S, M));                                            // (.., T, T_k)
  return w;
}

Tensor split_heads(const Tensor& P, int64_t heads) {
  detail::check_defined("split_heads", P, "P");
  if (heads < 1)
    throw ValueError("split_heads: heads must be at least 1, got " + std::to_string(heads));
  if ((P.rank() != 2 && P.rank() != 3) || P.size(-1) % heads != 0)
    throw ShapeError("split_heads: P must be (T, H d) or (B, T, H d) with H = " +
                     std::to_string(heads) + ", got " + P.shape().str());
  const int64_t B = P.rank() == 3 ? P.size(0) : 1, T = P.size(-2), d = P.size(-1) / heads;
  return permute(reshape(P, {B, T, heads, d}), {0, 2, 1, 3});  // (B, H, T, d)
}

Tensor merge_heads(const Tensor& P, bool batched) {
  detail::check_defined("merge_heads", P, "P");
  if (P.rank() != 4 || (!batched && P.size(0) != 1))
    throw ShapeError(std::string("merge_heads: P must be (B, H, T, d)") +
                     (batched ? "" : " with B = 1") + ", got " + P.shape().str());
  const int64_t B = P.size(0), H = P.size(1), T = P.size(2), d = P.size(3);
  const Tensor Y = permute(P, {0, 2, 1, 3});                         // (B, T, H, d)
  return batched ? reshape(Y, {B, T, H * d}) : reshape(Y, {T, H * d});  // (B, T, H d)
}

}  // namespace tg
