#include "tools/cli_checks.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace tg {

namespace {

// Parses all of v as a number, or nothing.
std::optional<double> whole_number(const std::string& v) {
  try {
    std::size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

CLI::Validator int_at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& v) {
        try {
          std::size_t used = 0;
          if (std::stoll(v, &used) >= lo && used == v.size()) return std::string();
        } catch (const std::exception&) {
        }
        return "must be an integer >= " + std::to_string(lo) + ", got '" + v + "'";
      },
      "INT >= " + std::to_string(lo));
}

CLI::Validator real_in(double lo, double hi) {
  const std::string range = std::isinf(hi) ? ">= " + CLI::detail::to_string(lo)
                                           : "in [" + CLI::detail::to_string(lo) + ", " +
                                                 CLI::detail::to_string(hi) + ")";
  return CLI::Validator(
      [lo, hi, range](std::string& v) {
        const std::optional<double> x = whole_number(v);
        if (x && std::isfinite(*x) && *x >= lo && (std::isinf(hi) || *x < hi))
          return std::string();
        return "must be a number " + range + ", got '" + v + "'";
      },
      "NUMBER " + range);
}

CLI::Validator positive_real() {
  return CLI::Validator(
      [](std::string& v) {
        const std::optional<double> x = whole_number(v);
        if (x && std::isfinite(*x) && *x > 0) return std::string();
        return "must be a positive number, got '" + v + "'";
      },
      "NUMBER > 0");
}

CLI::IsMember member_of(nn::EnumNames names) {
  return CLI::IsMember(std::vector<std::string>(names.begin(), names.end()));
}

}  // namespace tg
