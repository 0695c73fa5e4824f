#include <tapegrad/autograd/shape.h>

#include <string>

#include <tapegrad/autograd/error.h>

namespace tg {

namespace {
void check_dims(int rank, const int64_t* d) {
  if (rank > kMaxRank) {
    std::string dims;
    for (int i = 0; i < rank; ++i) dims += (i ? ", " : "") + std::to_string(d[i]);
    throw ShapeError("Shape: (" + dims + ") has rank " + std::to_string(rank) + "; at most " +
                     std::to_string(kMaxRank) + " is supported");
  }
  std::string dims;
  int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < rank; ++i) {
    if (d[i] < 0)
      throw ShapeError("Shape: dimension " + std::to_string(i) + " is negative (" +
                       std::to_string(d[i]) + ")");
    overflow = overflow || __builtin_mul_overflow(n, d[i], &n);
    dims += (i ? ", " : "") + std::to_string(d[i]);
  }
  if (overflow)
    throw ShapeError("Shape: (" + dims + ") has more elements than fit in int64");
}
}  // namespace

void Shape::throw_bad(const int64_t* dims, int rank) {
  check_dims(rank, dims);
  throw ShapeError("Shape: invalid rank " + std::to_string(rank));
}

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(dims.begin(), static_cast<int>(dims.size())) {}

Shape::Shape(const std::vector<int64_t>& dims)
    : Shape(dims.data(), static_cast<int>(dims.size())) {}

std::string Shape::index_str(int64_t flat) const {
  Shape index = *this;
  for (int d = rank_ - 1; d >= 0; --d) {
    index.dims_[d] = dims_[d] ? flat % dims_[d] : 0;
    flat = dims_[d] ? flat / dims_[d] : 0;
  }
  return index.str();
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (rank_ == 1) s += ",";
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int r = a.rank() > b.rank() ? a.rank() : b.rank();
  std::array<int64_t, kMaxRank> out{};
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": shapes do not broadcast: " + a.str() + " and " +
                       b.str());
    out[i] = da == 1 ? db : da;
  }
  return Shape(out.data(), r);
}

void throw_axis_error(int axis, const Shape& s, const char* op) {
  throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) +
                   " is out of range for shape " + s.str());
}

std::array<int64_t, kMaxRank> broadcast_strides(const Shape& s, const Shape& out) {
  std::array<int64_t, kMaxRank> st{};
  int64_t stride = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    const int o = out.rank() - s.rank() + i;
    st[o] = s[i] == 1 ? 0 : stride;
    stride *= s[i];
  }
  return st;
}

}  // namespace tg
