#pragma once
// What the fused-attention suites share: the relative difference their comparisons judge.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg::test {

/// max |a - b| / max(1, max |b|); infinite when a holds a non-finite value or the sizes differ
/// (the shapes are also expected equal).
inline double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  EXPECT_EQ(a.shape(), b.shape());
  if (x.size() != y.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    if (!std::isfinite(x[i])) diff = std::numeric_limits<double>::infinity();
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

}  // namespace tg::test
