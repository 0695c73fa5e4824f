#include <tapegrad/ops/norm_formula.h>

#include <string>

#include <tapegrad/autograd/error.h>
#include <tapegrad/ops/mean.h>
#include <tapegrad/ops/operators.h>
#include <tapegrad/ops/sqrt.h>

namespace tg::detail {

void check_per_channel(const char* op, const Tensor& X, const Tensor& p, const char* name) {
  if (!p.defined()) return;
  if (p.dtype() != X.dtype())
    throw ValueError(std::string(op) + ": " + name + " " + p.shape().str() + " " +
                     dtype_name(p.dtype()) + " and input " + X.shape().str() + " " +
                     dtype_name(X.dtype()) + ": dtypes differ");
  if (!(p.shape() == Shape{X.size(1)}))
    throw ShapeError(std::string(op) + ": " + name + " " + p.shape().str() + " must be (C,) = (" +
                     std::to_string(X.size(1)) + ",) for input " + X.shape().str());
}

Normalized normalize_over(const Tensor& X, const std::vector<int>& dims, double eps) {
  const Tensor Xc = sub(X, mean(X, dims, true));
  const Tensor r = rsqrt(add(mean(mul(Xc, Xc), dims, true), eps));
  return {mul(Xc, r), r};
}

Tensor normalize_over_backward(const Normalized& n, const Tensor& g, const std::vector<int>& dims) {
  const Tensor g_mean = mean(g, dims, true);
  const Tensor gx_mean = mean(mul(g, n.Xhat), dims, true);
  return mul(n.r, sub(sub(g, g_mean), mul(n.Xhat, gx_mean)));
}

}  // namespace tg::detail
