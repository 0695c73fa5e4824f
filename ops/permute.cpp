// permute: Y.shape[i] = X.shape[perm[i]];  dX = permute(dY, inverse(perm))

#include <tapegrad/ops/permute.h>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/op_util.h>

namespace tg {

namespace {
std::string perm_str(const std::vector<int>& p) {
  std::string s = "(";
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + ")";
}
}  // namespace

Tensor permute(const Tensor& X, const std::vector<int>& perm, const std::source_location& where) {
  detail::check_floating("permute", X);
  detail::check_defined("permute", X, "input");
  const int r = X.rank();
  std::array<bool, kMaxRank> seen{};
  bool ok = static_cast<int>(perm.size()) == r;
  for (int p : perm) {
    if (!ok || p < 0 || p >= r || seen[p]) {
      ok = false;
      break;
    }
    seen[p] = true;
  }
  if (!ok)
    throw ShapeError("permute: " + perm_str(perm) + " is not a permutation of the axes of " +
                     X.shape().str());
  const Shape& s = X.shape();
  int64_t d[kMaxRank];
  for (int i = 0; i < r; ++i) d[i] = s[perm[i]];
  std::vector<int> inv(r);
  for (int i = 0; i < r; ++i) inv[perm[i]] = i;
  auto backward = [inv](const Tensor& dY) -> Grads { return {permute(dY, inv)}; };
  // When the axes longer than 1 keep their order, the elements do too: a view, no copy.
  int last = -1;
  bool in_order = true;
  for (int i = 0; i < r && in_order; ++i)
    if (d[i] != 1) {
      in_order = perm[i] > last;
      last = perm[i];
    }
  if (in_order) {
    Tensor Y = X.detach();
    Y.impl().shape = Shape(d, r);
    return record("permute", Y, {X}, where).formula(std::move(backward));
  }
  Tensor Y(Shape(d, r), X.dtype());
  // Input strides read in output-axis order, padded to four loops.
  std::array<int64_t, kMaxRank> in_stride{}, st{}, dims{1, 1, 1, 1};
  int64_t acc = 1;
  for (int i = r - 1; i >= 0; --i) {
    in_stride[i] = acc;
    acc *= s[i];
  }
  const int off = kMaxRank - r;
  for (int i = 0; i < r; ++i) {
    dims[off + i] = d[i];
    st[off + i] = in_stride[perm[i]];
  }
  dispatch(X.dtype(), [&]<class T>() {
    const T* px = X.data<T>();
    T* py = Y.data<T>();
    int64_t k = 0;
    for (int64_t i0 = 0; i0 < dims[0]; ++i0)
      for (int64_t i1 = 0; i1 < dims[1]; ++i1)
        for (int64_t i2 = 0; i2 < dims[2]; ++i2) {
          const T* row = px + i0 * st[0] + i1 * st[1] + i2 * st[2];
          if (st[3] == 1) {
            for (int64_t i3 = 0; i3 < dims[3]; ++i3) py[k++] = row[i3];
          } else {
            for (int64_t i3 = 0; i3 < dims[3]; ++i3) py[k++] = row[i3 * st[3]];
          }
        }
  });
  return record("permute", Y, {X}, where).formula(std::move(backward));
}

}  // namespace tg
