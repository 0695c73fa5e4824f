// Printing a Tensor as PyTorch does: torch/_tensor_str.py (PyTorch 1.13, default print options:
// precision 4, threshold 1000, edgeitems 3, linewidth 80) written out in C++, one function per
// function there, so the two can be read side by side.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

namespace {

constexpr int64_t kThreshold = 1000;  // more elements than this: summarise
constexpr int64_t kEdgeItems = 3;     // entries kept at each end of a summarised axis
constexpr int kLineWidth = 80;

std::string printf_str(const char* format, int precision, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, precision, v);
  return buf;
}

// Python's "{:.{p}f}" / "{:.{p}e}": as printf, except that a NaN is "nan" whatever its sign bit.
std::string fixed(double v, int precision) {
  return std::isnan(v) ? "nan" : printf_str("%.*f", precision, v);
}
std::string sci(double v, int precision) {
  return std::isnan(v) ? "nan" : printf_str("%.*e", precision, v);
}

// The element values: int64 exactly, bool as True / False (PyTorch's), the floating dtypes as
// double (exact for float32 too).
struct Values {
  const Tensor& t;
  bool floating() const { return is_floating(t.dtype()); }
  std::string integer(int64_t i) const {
    if (t.dtype() == Dtype::b8) return t.data<bool>()[i] ? "True" : "False";
    return std::to_string(t.data<int64_t>()[i]);
  }
  double real(int64_t i) const {
    return t.dtype() == Dtype::f32 ? t.data<float>()[i] : t.data<double>()[i];
  }
};

// _Formatter: one width and one notation for every element printed, chosen from those elements.
class Formatter {
 public:
  Formatter(const Values& v, const std::vector<int64_t>& shown, int precision)
      : v_(v), precision_(precision) {
    if (!v.floating()) {
      for (int64_t i : shown)
        max_width_ = std::max<int>(max_width_, v.integer(i).size());
      return;
    }
    std::vector<double> finite;  // the nonzero finite values
    for (int64_t i : shown)
      if (std::isfinite(v.real(i)) && v.real(i) != 0) finite.push_back(v.real(i));
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double x : finite) lo = std::min(lo, std::abs(x)), hi = std::max(hi, std::abs(x));
    int_mode_ =
        std::all_of(finite.begin(), finite.end(), [](double x) { return x == std::ceil(x); });
    sci_mode_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double x : finite) {
      const std::string s = sci_mode_   ? sci(x, precision)
                            : int_mode_ ? fixed(x, 0) + "."  // the point says "floating"
                                        : fixed(x, precision);
      max_width_ = std::max<int>(max_width_, s.size());
    }
  }

  int width() const { return max_width_; }

  std::string format(int64_t i) const {
    std::string s;
    if (!v_.floating()) {
      s = v_.integer(i);
    } else {
      const double x = v_.real(i);
      if (sci_mode_)
        s = sci(x, precision_);
      else if (int_mode_)
        s = fixed(x, 0) + (std::isfinite(x) ? "." : "");
      else
        s = fixed(x, precision_);
    }
    return std::string(std::max<int>(0, max_width_ - static_cast<int>(s.size())), ' ') + s;
  }

 private:
  const Values& v_;
  int precision_;
  bool int_mode_ = true, sci_mode_ = false;
  int max_width_ = 1;
};

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// "[" + s + "]", appended (GCC 12 warns falsely, -Wrestrict, on a literal + a temporary).
std::string bracketed(const std::string& s) {
  std::string out = "[";
  out += s;
  out += ']';
  return out;
}

class Printer {
 public:
  Printer(const Tensor& t, int precision)
      : t_(t),
        values_{t},
        summarize_(t.numel() > kThreshold),
        formatter_(values_, shown(), precision) {}

  // _tensor_str_with_formatter: the sub-tensor at axis `axis` starting at flat index `offset`.
  std::string str(int axis, int64_t offset, int indent) const {
    const int rank = t_.rank();
    if (rank == 0) return formatter_.format(0);
    if (axis == rank - 1) return vector_str(offset, indent);
    const int64_t stride = t_.shape().numel() / prefix_numel(axis + 1);
    std::vector<std::string> slices;
    for (int64_t i : kept(axis))
      slices.push_back(i < 0 ? "..." : str(axis + 1, offset + i * stride, indent + 1));
    const int below = rank - axis;  // the sub-tensor's rank: as many line breaks, less one
    std::string sep = ",";
    sep.append(below - 1, '\n');
    sep.append(indent + 1, ' ');
    return bracketed(join(slices, sep));
  }

 private:
  // _vector_str: as many elements per line as fit in the line width.
  std::string vector_str(int64_t offset, int indent) const {
    const int element_length = formatter_.width() + 2;
    const int per_line = std::max(1, (kLineWidth - indent) / element_length);
    std::vector<std::string> data;
    for (int64_t i : kept(t_.rank() - 1))
      data.push_back(i < 0 ? " ..." : formatter_.format(offset + i));
    std::vector<std::string> lines;
    for (size_t i = 0; i < data.size(); i += per_line)
      lines.push_back(
          join({data.begin() + i, data.begin() + std::min(data.size(), i + per_line)}, ", "));
    std::string sep = ",\n";
    sep.append(indent + 1, ' ');
    return bracketed(join(lines, sep));
  }

  // The indices printed along an axis; -1 stands for the `...` between the two ends.
  std::vector<int64_t> kept(int axis) const {
    const int64_t n = t_.shape()[axis];
    std::vector<int64_t> idx;
    if (summarize_ && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  int64_t prefix_numel(int axes) const {
    int64_t n = 1;
    for (int a = 0; a < axes; ++a) n *= t_.shape()[a];
    return n;
  }

  // get_summarized_data: the flat indices of every element printed (all of them, or the
  // edges of each axis when summarising); the formatter sees only these.
  std::vector<int64_t> shown() const {
    std::vector<int64_t> flat{0};
    for (int a = 0; a < t_.rank(); ++a) {
      std::vector<int64_t> next;
      for (int64_t base : flat)
        for (int64_t i : kept(a))
          if (i >= 0) next.push_back(base * t_.shape()[a] + i);
      flat = std::move(next);
    }
    return flat;
  }

  const Tensor& t_;
  Values values_;
  bool summarize_;
  Formatter formatter_;
};

// _add_suffixes: each suffix on the last line, or on a new line when it would pass the width.
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int indent) {
  const size_t nl = s.rfind('\n');
  int last_line = nl == std::string::npos ? static_cast<int>(s.size()) + 2
                                          : static_cast<int>(s.size() - nl) + 1;
  for (const std::string& suffix : suffixes) {
    const int n = static_cast<int>(suffix.size());
    if (last_line + n + 2 > kLineWidth) {
      s += ",\n";
      s.append(indent, ' ');
      s += suffix;
      last_line = indent + n;
    } else {
      s += ", ";
      s += suffix;
      last_line += n + 2;
    }
  }
  return s + ")";
}

}  // namespace

// _str_intern for a dense CPU tensor.
std::string Tensor::str(int precision) const {
  if (precision < 0 || precision > 30)
    throw ValueError("Tensor::str: precision " + std::to_string(precision) +
                     " is outside [0, 30] (digits after the point)");
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  std::string body;
  if (numel() == 0) {
    if (rank() != 1) suffixes.push_back("size=" + shape().str());
    // no element says int64, so every dtype but the default is named
    if (dtype() != get_default_dtype())
      suffixes.push_back(std::string("dtype=") + dtype_name(dtype()));
    body = "[]";
  } else {
    if (dtype() != get_default_dtype() && is_floating(dtype()))
      suffixes.push_back(std::string("dtype=") + dtype_name(dtype()));
    body = Printer(*this, precision).str(0, 0, indent);
  }
  if (!is_leaf())
    suffixes.push_back("grad_fn=<" + op_name() + ">");
  else if (requires_grad())
    suffixes.push_back("requires_grad=True");
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& x) { return os << x.str(); }
std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

}  // namespace tg
