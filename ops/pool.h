#pragma once
#include <cstdint>
#include <source_location>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/conv.h>

namespace tg {

/// torch.nn.functional.max_pool2d on (N, C, H, W): the maximum of each kernel window (windows
/// `stride` apart, the kernel size when left out; `padding` of -inf on both sides, at most half
/// the kernel), giving (N, C, H_out, W_out), H_out = (H + 2 p - k) / s + 1. The gradient goes to
/// the entry PyTorch picks: the first maximum of the window in row-major order (a NaN counts as
/// the maximum). Throws ShapeError (wrong rank, a kernel larger than the padded input) or
/// ValueError (kernel or stride below 1, padding negative or above half the kernel, int64).
Tensor max_pool2d(const Tensor& X, Int2 kernel,
                  const std::source_location& where = std::source_location::current());
Tensor max_pool2d(const Tensor& X, Int2 kernel, Int2 stride, Int2 padding = 0,
                  const std::source_location& where = std::source_location::current());

/// torch.nn.functional.avg_pool2d with count_include_pad = true (PyTorch's default): the mean
/// of each window over kH kW entries, zero padding included. Arguments and errors as max_pool2d.
Tensor avg_pool2d(const Tensor& X, Int2 kernel,
                  const std::source_location& where = std::source_location::current());
Tensor avg_pool2d(const Tensor& X, Int2 kernel, Int2 stride, Int2 padding = 0,
                  const std::source_location& where = std::source_location::current());

/// max_pool2d and avg_pool2d over the last axis of (N, C, L), as torch.nn.functional's
/// max_pool1d and avg_pool1d; errors as theirs, naming the 1-D op.
Tensor max_pool1d(const Tensor& X, int64_t kernel,
                  const std::source_location& where = std::source_location::current());
Tensor max_pool1d(const Tensor& X, int64_t kernel, int64_t stride, int64_t padding = 0,
                  const std::source_location& where = std::source_location::current());
Tensor avg_pool1d(const Tensor& X, int64_t kernel,
                  const std::source_location& where = std::source_location::current());
Tensor avg_pool1d(const Tensor& X, int64_t kernel, int64_t stride, int64_t padding = 0,
                  const std::source_location& where = std::source_location::current());

}  // namespace tg
