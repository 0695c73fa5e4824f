#include "tools/demo_util.h"

#include <cmath>
#include <cstdio>

namespace tg::demo {

void heading(std::ostream& out, const std::string& title) {
  out << "\n== " << title << " " << std::string(title.size() < 90 ? 90 - title.size() : 0, '=')
      << "\n";
}

void show(std::ostream& out, const std::string& name, const Tensor& t, int precision,
          int64_t max_rows) {
  out << "  " << name << "  shape " << t.shape().str() << "\n";
  const auto v = t.to_vector();
  const int64_t cols = t.rank() ? t.size(-1) : 1, rows = cols ? t.numel() / cols : 0;
  char buf[64];
  for (int64_t i = 0; i < std::min(rows, max_rows); ++i) {
    out << "    [";
    for (int64_t j = 0; j < cols; ++j) {
      const double x = v[i * cols + j];
      if (std::isinf(x))
        std::snprintf(buf, sizeof buf, "%*s", precision + 4, x < 0 ? "-inf" : "inf");
      else
        std::snprintf(buf, sizeof buf, "%*.*f", precision + 4, precision, x);
      out << buf;
    }
    out << " ]\n";
  }
  if (rows > max_rows) out << "    ... " << rows - max_rows << " more rows\n";
}

void verdict(std::ostream& out, bool ok, const std::string& claim, bool& all_ok) {
  out << "  [" << (ok ? " ok " : "FAIL") << "] " << claim << "\n";
  all_ok = all_ok && ok;
}

std::string sci(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  return buf;
}

}  // namespace tg::demo
