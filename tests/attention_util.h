#pragma once
// What the attention suites share: the relative difference their comparisons judge, a closeness
// check on flat values, and RoPE written as loops (the reference the rope op is held to).

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

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], want[k], tol * std::max(1.0, std::fabs(want[k]))) << what << " at " << k;
}

// Rotates each pair (2i, 2i+1) of row m of x (T, d_h) by m * base^(-2i/d_h).
inline void rope_loops(std::vector<double>& x, int64_t T, int64_t d_h, double base) {
  for (int64_t m = 0; m < T; ++m)
    for (int64_t i = 0; i < d_h / 2; ++i) {
      const double a = m * std::pow(base, -2.0 * i / d_h);
      double& x0 = x[m * d_h + 2 * i];
      double& x1 = x[m * d_h + 2 * i + 1];
      const double y0 = x0 * std::cos(a) - x1 * std::sin(a);
      x1 = x0 * std::sin(a) + x1 * std::cos(a);
      x0 = y0;
    }
}

}  // namespace tg::test
