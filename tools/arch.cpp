#include "tools/arch.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include <tapegrad/nn/config_json.h>
#include "tools/json_holds.h"

namespace tg {

// The adapters, one file each (tools/arch_NAME.cpp).
extern const Arch kGptArch;
extern const Arch kLlamaArch;
extern const Arch kCnnArch;
extern const Arch kMlpArch;

namespace {

using Json = nlohmann::json;

// Every architecture the program knows, the default first.
const Arch* const kArchs[] = {&kGptArch, &kLlamaArch, &kCnnArch, &kMlpArch};

}  // namespace

void Model::set_checkpoint_blocks() {
  throw UsageError(std::string("--checkpoint-blocks: --arch ") + arch().name +
                   " has no blocks to checkpoint (gpt and llama have)");
}

const Arch* find_arch(const std::string& name) {
  for (const Arch* a : kArchs)
    if (name == a->name) return a;
  return nullptr;
}

const Arch& default_arch() { return *kArchs[0]; }

const Arch& default_image_arch() {
  for (const Arch* a : kArchs)
    if (a->images) return *a;
  return default_arch();
}

bool is_model_flag(const std::string& flag) {
  for (const Arch* a : kArchs)
    for (const ModelFlag& f : a->flags)
      if (flag == f.flag) return true;
  return false;
}

std::string arch_names() {
  std::vector<const char*> names;
  for (const Arch* a : kArchs) names.push_back(a->name);
  return nn::one_of(names);
}

const Arch& arch_of(const TrainArgs& args) {
  if (args.arch.empty()) return default_arch();
  const Arch* arch = find_arch(args.arch);
  if (arch == nullptr)
    throw UsageError("--arch must be " + arch_names() + ", got '" + args.arch + "'");
  return *arch;
}

std::string config_json_of(const Arch& arch, const TrainArgs& args) {
  Json j = Json::object();
  for (const ModelFlag& f : arch.flags)
    std::visit(
        [&](auto member) {
          const auto& value = args.*member;
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>)
            j[f.key] = f.negated ? !value : value;
          else
            j[f.key] = value;
        },
        f.member);
  return j.dump();
}

void set_model_flags(const Model& model, TrainArgs& args) {
  const Json j = Json::parse(model.config_json(), nullptr, /*allow_exceptions=*/false);
  for (const ModelFlag& f : model.arch().flags)
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(args.*member)>;
          const auto it = j.is_object() ? j.find(f.key) : j.end();
          if (it == j.end() || !json_holds<T>(*it))
            throw ValueError(std::string(model.arch().name) + " config " + model.config_json() +
                             ": no valid '" + f.key + "' for --" + f.flag);
          const T value = it->template get<T>();
          if constexpr (std::is_same_v<T, bool>)
            args.*member = f.negated ? !value : value;
          else
            args.*member = value;
        },
        f.member);
  args.arch = model.arch().name;
}

std::string flag_text(const TrainArgs& args, const ModelFlag& f) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = args.*member;
        using T = std::remove_cvref_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>) {
          return value ? "on" : "off";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return value;
        } else if constexpr (std::is_integral_v<T>) {
          return std::to_string(value);
        } else {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", value);
          return buf;
        }
      },
      f.member);
}

}  // namespace tg
