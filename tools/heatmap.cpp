#include "tools/heatmap.h"

#include <cmath>
#include <string>

namespace tg {

std::string heatmap(const Tensor& A) {
  if (A.rank() != 2) throw ShapeError("heatmap: needs a 2-D tensor, got shape " + A.shape().str());
  static const std::string shades = " .:-=+*#%@";
  const int64_t R = A.size(0), C = A.size(1);
  const auto a = A.to_vector();
  std::string s = "      j:";
  for (int64_t j = 0; j < C; ++j) s.append(j < 10 ? " " : "").append(std::to_string(j % 100));
  s += "\n";
  for (int64_t i = 0; i < R; ++i) {
    s.append("  i=").append(i < 10 ? " " : "").append(std::to_string(i)).append(" |");
    for (int64_t j = 0; j < C; ++j) {
      const double v = a[i * C + j];
      char c = '?';
      if (v == 0) c = ' ';
      else if (std::isfinite(v) && v > 0)
        c = shades[std::min<std::size_t>(shades.size() - 1,
                                         1 + static_cast<std::size_t>(v * (shades.size() - 1)))];
      s += ' ';
      s += c;
    }
    s += " |\n";
  }
  s += "  shades: ' ' exactly 0, '.' below 0.11, ':' '-' '=' '+' '*' '#' '%' rising, '@' near 1\n";
  return s;
}

}  // namespace tg
