#include "tools/train_args.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

namespace tg {

namespace {

using Json = nlohmann::json;

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The run flags a checkpoint records, by flag name (without dashes).
using FlagRef = std::variant<int64_t*, uint64_t*, double*, std::string*>;
std::vector<std::pair<const char*, FlagRef>> run_flags(TrainArgs& a) {
  return {{"batch", &a.batch},       {"steps", &a.steps},         {"optimizer", &a.optimizer},
          {"lr", &a.lr},             {"lr-min", &a.lr_min},       {"warmup", &a.warmup},
          {"beta1", &a.beta1},       {"beta2", &a.beta2},         {"eps", &a.eps},
          {"weight-decay", &a.weight_decay}, {"momentum", &a.momentum},
          {"grad-clip", &a.grad_clip}, {"eval-every", &a.eval_every},
          {"eval-batches", &a.eval_batches}, {"seed", &a.seed}};
}

void need(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

// Ranges of every flag, whether given or taken from a checkpoint.
void check_values(const TrainArgs& a) {
  need(a.gelu == "tanh" || a.gelu == "erf", "--gelu must be tanh or erf, got '" + a.gelu + "'");
  need(a.dtype == "f32" || a.dtype == "f64", "--dtype must be f32 or f64, got '" + a.dtype + "'");
  need(a.optimizer == "adamw" || a.optimizer == "sgd",
       "--optimizer must be adamw or sgd, got '" + a.optimizer + "'");
  const std::pair<const char*, int64_t> sizes[] = {{"--layers", a.layers}, {"--heads", a.heads},
                                                   {"--embd", a.embd},     {"--block", a.block},
                                                   {"--batch", a.batch},   {"--steps", a.steps},
                                                   {"--eval-batches", a.eval_batches}};
  for (const auto& [flag, v] : sizes)
    need(v >= 1, std::string(flag) + " must be at least 1, got " + std::to_string(v));
  need(a.embd % a.heads == 0, "--heads " + std::to_string(a.heads) + " must divide --embd " +
                                  std::to_string(a.embd));
  need(a.warmup >= 0, "--warmup must be >= 0, got " + std::to_string(a.warmup));
  need(a.eval_every >= 0, "--eval-every must be >= 0 (0 = off), got " + std::to_string(a.eval_every));
  need(a.threads >= 0, "--threads must be >= 1, got " + std::to_string(a.threads));
  need(a.dropout >= 0 && a.dropout < 1, "--dropout must be in [0, 1), got " + num(a.dropout));
  need(a.beta1 >= 0 && a.beta1 < 1, "--beta1 must be in [0, 1), got " + num(a.beta1));
  need(a.beta2 >= 0 && a.beta2 < 1, "--beta2 must be in [0, 1), got " + num(a.beta2));
  const std::pair<const char*, double> reals[] = {
      {"--lr", a.lr},   {"--lr-min", a.lr_min},         {"--eps", a.eps},
      {"--momentum", a.momentum}, {"--weight-decay", a.weight_decay}, {"--grad-clip", a.grad_clip}};
  for (const auto& [flag, v] : reals)
    need(finite_at_least(v, 0), std::string(flag) + " must be a number >= 0, got " + num(v));
}

// The flags of one optimizer given with the other.
void check_optimizer_flags(const TrainArgs& a) {
  if (a.optimizer == "adamw")
    need(!a.given.count("momentum"), "--momentum applies to --optimizer sgd, not adamw");
  else
    for (const char* f : {"beta1", "beta2", "eps"})
      need(!a.given.count(f), std::string("--") + f + " applies to --optimizer adamw, not sgd");
}

}  // namespace

void check_train_flags(const TrainArgs& a) {
  const int sources = !a.text.empty() + !a.task.empty() + !a.batches.empty();
  need(sources == 1, "give exactly one data source: --text FILE, --task induction or --batches "
                     "FILE.npy (got " + std::to_string(sources) + ")");
  need(a.task.empty() || a.task == "induction",
       "--task must be induction, got '" + a.task + "'");
  need(!a.out.empty(), "--out DIR is required");
  need(a.init.empty() || a.resume.empty(),
       "--init and --resume do not go together: --resume continues a run with its own weights");
  if (!a.text.empty())
    need(!a.given.count("vocab"),
         "--vocab goes with --task or --batches; a --text model's vocabulary is the text's characters");
  else if (a.resume.empty())
    need(a.vocab >= 1, std::string(a.task.empty() ? "--batches" : "--task induction") +
                           " needs --vocab V (the number of token ids), got " +
                           (a.given.count("vocab") ? std::to_string(a.vocab) : "none"));
  if (a.resume.empty()) check_optimizer_flags(a);  // else once the checkpoint's optimizer is known
  check_values(a);
  std::error_code ec;
  if (std::filesystem::exists(a.out, ec) && !std::filesystem::is_directory(a.out, ec))
    throw IoError(a.out + ": --out must be a folder, and a file of that name exists");
}

void apply_checkpoint_flags(TrainArgs& a, const nn::GPTConfig& c,
                            const std::map<std::string, std::string>& metadata,
                            const std::string& file) {
  // The model is the checkpoint's; a model flag given again must agree with it.
  const auto agree = [&](const char* flag, const std::string& given, const std::string& saved) {
    need(!a.given.count(flag) || given == saved,
         std::string("--") + flag + " " + given + " differs from the checkpoint's " + saved +
             " (a resumed run keeps the model it was started with)");
  };
  const auto str = [](int64_t v) { return std::to_string(v); };
  agree("layers", str(a.layers), str(c.n_layer));
  agree("heads", str(a.heads), str(c.n_head));
  agree("embd", str(a.embd), str(c.n_embd));
  agree("block", str(a.block), str(c.block_size));
  if (a.text.empty()) agree("vocab", str(a.vocab), str(c.vocab_size));
  agree("no-bias", a.no_bias ? "on" : "off", c.bias ? "off" : "on");
  agree("gelu", a.gelu, c.gelu == nn::GeluKind::tanh ? "tanh" : "erf");
  agree("attention-only", a.attention_only ? "on" : "off", c.attention_only ? "on" : "off");
  agree("dropout", num(a.dropout), num(c.dropout));
  agree("dtype", a.dtype, c.dtype == Dtype::f32 ? "f32" : "f64");
  a.layers = c.n_layer;
  a.heads = c.n_head;
  a.embd = c.n_embd;
  a.block = c.block_size;
  if (a.text.empty()) a.vocab = c.vocab_size;
  a.no_bias = !c.bias;
  a.gelu = c.gelu == nn::GeluKind::tanh ? "tanh" : "erf";
  a.attention_only = c.attention_only;
  a.dropout = c.dropout;
  a.dtype = c.dtype == Dtype::f32 ? "f32" : "f64";

  const auto kind = metadata.find("tapegrad.data");
  const std::string mine = !a.text.empty() ? "text" : !a.task.empty() ? "induction" : "batches";
  if (kind != metadata.end())
    need(kind->second == mine, "the run in " + a.resume + " trained on " + kind->second +
                                   " data, this command gives " + mine);
  const auto saved = metadata.find("tapegrad.args");
  if (saved == metadata.end()) throw IoError(file + ": no tapegrad.args in the metadata");
  const Json j = Json::parse(saved->second, nullptr, false);
  if (!j.is_object()) throw IoError(file + ": tapegrad.args is not a JSON object");
  for (auto& [flag, ref] : run_flags(a)) {
    const auto it = j.find(flag);
    const bool ok = it != j.end() && std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, std::string>) return it->is_string();
          else if constexpr (std::is_integral_v<T>) return it->is_number_integer();
          else return it->is_number();
        }, ref);
    if (!ok) throw IoError(file + ": tapegrad.args has no valid '" + flag + "'");
    const bool given = a.given.count(flag) > 0;
    std::visit([&](auto* p) {
      using T = std::remove_pointer_t<decltype(p)>;
      const T value = it->get<T>();
      // The optimizer's state and the generators belong to the run: they cannot change.
      if (given && value != *p && (std::string(flag) == "optimizer" || std::string(flag) == "seed"))
        throw UsageError("--" + std::string(flag) + " differs from the checkpoint's (" +
                         it->dump() + "); a resumed run keeps it");
      if (!given) *p = value;
    }, ref);
  }
  check_optimizer_flags(a);
  check_values(a);
}

std::string run_args_json(const TrainArgs& args) {
  TrainArgs copy = args;
  Json j = Json::object();
  for (auto& [flag, ref] : run_flags(copy)) std::visit([&](auto* p) { j[flag] = *p; }, ref);
  return j.dump();
}

nn::GPTConfig model_config(const TrainArgs& a, int64_t vocab) {
  nn::GPTConfig c;
  c.vocab_size = vocab;
  c.block_size = a.block;
  c.n_layer = a.layers;
  c.n_head = a.heads;
  c.n_embd = a.embd;
  c.bias = !a.no_bias;
  c.gelu = a.gelu == "erf" ? nn::GeluKind::erf : nn::GeluKind::tanh;
  c.attention_only = a.attention_only;
  c.dropout = a.dropout;
  c.dtype = a.dtype == "f64" ? Dtype::f64 : Dtype::f32;
  return c;
}

}  // namespace tg
