#pragma once
// Whether a JSON value holds what get<T>() should read from it, for the readers of
// tapegrad.args and tapegrad.config in tools/.

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

namespace tg {

/// True when `j` is a string for std::string, a boolean for bool, an integer for the other
/// integral types and a number for double. Never throws.
template <class T>
bool json_holds(const nlohmann::json& j) {
  if constexpr (std::is_same_v<T, std::string>) return j.is_string();
  else if constexpr (std::is_same_v<T, bool>) return j.is_boolean();
  else if constexpr (std::is_integral_v<T>) return j.is_number_integer();
  else return j.is_number();
}

}  // namespace tg
