#pragma once
// A model config as a flat JSON object (a checkpoint's tapegrad.config). A config lists its
// fields once, each a JSON key and a reference to its member (nn/gpt_config.cpp's
// config_fields), and the two functions below write and read every field of such a list, so
// the two directions cannot drift apart. Enum members are written by name.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <tapegrad/autograd/dtype.h>

namespace tg::nn {

/// The spellings of an enum's values, in the enum's order: value i is names[i].
using EnumNames = std::span<const char* const>;

/// A model's floating dtype as configs and the --dtype flag spell it (Dtype::f32, Dtype::f64).
inline constexpr const char* kDtypeNames[] = {"f32", "f64"};

/// The position of `name` in `names`, or nullopt. Never throws.
std::optional<std::size_t> find_name(EnumNames names, std::string_view name);
/// The names for a message: "tanh or erf", "a, b or c". Never throws.
std::string one_of(EnumNames names);

/// An enum member, read and written through its names.
struct EnumRef {
  EnumNames names;
  std::function<std::size_t()> get;
  std::function<void(std::size_t)> set;
};

/// `member` as an EnumRef over `names`. Never throws.
template <class E>
EnumRef enum_ref(E& member, EnumNames names) {
  return {names, [&member] { return static_cast<std::size_t>(member); },
          [&member](std::size_t i) { member = static_cast<E>(i); }};
}

/// One field of a config: its JSON key and the member it holds.
struct ConfigField {
  const char* key;
  std::variant<int64_t*, bool*, double*, EnumRef> member;
};

/// The fields as the text of a JSON object, keys in sorted order. Throws ValueError for an
/// enum value that has no name.
std::string config_to_json(const std::vector<ConfigField>& fields);
/// Sets every field from the JSON object `json`. Throws ValueError ("is not a JSON object",
/// "has no integer field 'n_layer'", "has gelu 'x' (tanh or erf)").
void config_from_json(const std::string& json, const std::vector<ConfigField>& fields);

}  // namespace tg::nn
