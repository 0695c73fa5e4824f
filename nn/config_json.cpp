#include <tapegrad/nn/config_json.h>

#include <nlohmann/json.hpp>

#include <tapegrad/autograd/error.h>

namespace tg::nn {

namespace {

using Json = nlohmann::json;

static_assert(static_cast<int>(Dtype::f32) == 0 && static_cast<int>(Dtype::f64) == 1,
              "kDtypeNames lists the floating dtypes in Dtype's order");

// The JSON kind a member's value must have, for "has no integer field 'n_layer'".
struct Kind {
  const char* name;
  bool (Json::*is)() const noexcept;
};
Kind kind_of(int64_t*) { return {"integer", &Json::is_number_integer}; }
Kind kind_of(bool*) { return {"boolean", &Json::is_boolean}; }
Kind kind_of(double*) { return {"number", &Json::is_number}; }
Kind kind_of(const EnumRef&) { return {"string", &Json::is_string}; }

Json to_value(int64_t* v) { return *v; }
Json to_value(bool* v) { return *v; }
Json to_value(double* v) { return *v; }
Json to_value(const EnumRef& e) {
  const std::size_t i = e.get();
  if (i >= e.names.size())
    throw ValueError("config: enum value " + std::to_string(i) + " has no name (" +
                     one_of(e.names) + ")");
  return e.names[i];
}

void from_value(const Json& j, const char*, int64_t* v) { *v = j.get<int64_t>(); }
void from_value(const Json& j, const char*, bool* v) { *v = j.get<bool>(); }
void from_value(const Json& j, const char*, double* v) { *v = j.get<double>(); }
void from_value(const Json& j, const char* key, const EnumRef& e) {
  const std::string name = j.get<std::string>();
  const std::optional<std::size_t> i = find_name(e.names, name);
  if (!i) throw ValueError("has " + std::string(key) + " '" + name + "' (" + one_of(e.names) + ")");
  e.set(*i);
}

}  // namespace

std::optional<std::size_t> find_name(EnumNames names, std::string_view name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return i;
  return std::nullopt;
}

std::string one_of(EnumNames names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

std::string config_to_json(const std::vector<ConfigField>& fields) {
  Json j = Json::object();  // std::map underneath: the keys come out sorted
  for (const ConfigField& f : fields)
    j[f.key] = std::visit([](const auto& member) { return to_value(member); }, f.member);
  return j.dump();
}

void config_from_json(const std::string& json, const std::vector<ConfigField>& fields) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw ValueError("is not a JSON object");
  for (const ConfigField& f : fields) {
    std::visit(
        [&](const auto& member) {
          const Kind kind = kind_of(member);
          const auto it = j.find(f.key);
          if (it == j.end() || !((*it).*kind.is)())
            throw ValueError("has no " + std::string(kind.name) + " field '" + f.key + "'");
          from_value(*it, f.key, member);
        },
        f.member);
  }
}

}  // namespace tg::nn
