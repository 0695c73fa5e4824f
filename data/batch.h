#pragma once
// A batch of examples, rows first: inputs x and the labels y a model learns to predict from them.
//   next-token text:  x (B, T) int64 tokens, y (B, T) int64: y[b, t] is the token after x[b, t]
//   images (next):    x (B, 1, H, W) float, y (B) int64 classes
// A label of -1 counts for nothing (cross_entropy's ignore_index).

#include <cstdint>

#include <tapegrad/autograd/tensor.h>

namespace tg::data {

struct Batch {
  Tensor x;         // (B, ...) of any dtype: the model's input
  Tensor y;         // (B, ...) int64: the labels
  Tensor scored{};  // y's shape, int64 1 or 0: the labels an accuracy counts (the induction
                    // task's predictable targets); undefined where the source reports none
};

/// The number of labels batch.scored marks (0 when it is undefined). Never throws.
int64_t scored_count(const Batch& batch);

/// Argmax accuracy (first maximum on ties, as torch.argmax; NaN counts as the maximum) of
/// logits (..., C), y's shape plus the classes, on the labels batch.scored marks; NaN when it
/// marks none or is undefined. Throws ShapeError when the logits do not fit y, ValueError for
/// int64 logits.
double scored_accuracy(const Tensor& logits, const Batch& batch);

}  // namespace tg::data
