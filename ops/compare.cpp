// The comparisons: M = a OP b elementwise (broadcasting), a bool mask; no derivative (a step
// function of its inputs, whose gradient is 0 wherever it exists: nothing is recorded).

#include <tapegrad/ops/compare.h>

#include <array>
#include <functional>

#include <tapegrad/ops/broadcast_walk.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {

template <class Op>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, Op cmp) {
  detail::check_same_dtype(op, a, b);
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out(s, Dtype::b8);
  bool* po = out.data<bool>();
  dispatch_any(a.dtype(), [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    if (a.shape() == b.shape()) {
      for (int64_t k = 0; k < s.numel(); ++k) po[k] = cmp(pa[k], pb[k]);
      return;
    }
    detail::broadcast_walk<2>(s, {a.shape(), b.shape()}, [&](int64_t k, const auto& off) {
      po[k] = cmp(pa[off[0]], pb[off[1]]);
    });
  });
  return out;
}

// b as a scalar tensor of a's dtype (a bool is b != 0).
Tensor like(const Tensor& a, double b) {
  detail::check_defined("compare", a, "input");
  return full(Shape{}, b, a.dtype());
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", a, b, std::equal_to<>()); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", a, b, std::not_equal_to<>()); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", a, b, std::less<>()); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", a, b, std::less_equal<>()); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", a, b, std::greater<>()); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", a, b, std::greater_equal<>()); }
Tensor eq(const Tensor& a, double b) { return eq(a, like(a, b)); }
Tensor ne(const Tensor& a, double b) { return ne(a, like(a, b)); }
Tensor lt(const Tensor& a, double b) { return lt(a, like(a, b)); }
Tensor le(const Tensor& a, double b) { return le(a, like(a, b)); }
Tensor gt(const Tensor& a, double b) { return gt(a, like(a, b)); }
Tensor ge(const Tensor& a, double b) { return ge(a, like(a, b)); }

Tensor logical_not(const Tensor& mask) {
  detail::check_defined("logical_not", mask, "input");
  if (mask.dtype() != Dtype::b8)
    throw ValueError("logical_not: needs a bool tensor, got " + std::string(dtype_name(mask.dtype())) +
                     " of shape " + mask.shape().str());
  Tensor out(mask.shape(), Dtype::b8);
  const bool* p = mask.data<bool>();
  bool* o = out.data<bool>();
  for (int64_t k = 0; k < mask.numel(); ++k) o[k] = !p[k];
  return out;
}

}  // namespace tg
