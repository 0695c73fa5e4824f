#include "tools/train_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

#include <tapegrad/nn/config_json.h>
#include <tapegrad/nn/gpt_config.h>
#include "tools/json_holds.h"

namespace tg {

namespace {

using Json = nlohmann::json;

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The run flags a checkpoint records, by flag name (without dashes).
using FlagRef = std::variant<int64_t*, uint64_t*, double*, std::string*, bool*>;
std::vector<std::pair<const char*, FlagRef>> run_flags(TrainArgs& a) {
  return {{"batch", &a.batch},       {"steps", &a.steps},         {"optimizer", &a.optimizer},
          {"lr", &a.lr},             {"lr-min", &a.lr_min},       {"warmup", &a.warmup},
          {"beta1", &a.beta1},       {"beta2", &a.beta2},         {"eps", &a.eps},
          {"weight-decay", &a.weight_decay}, {"momentum", &a.momentum},
          {"grad-clip", &a.grad_clip}, {"eval-every", &a.eval_every},
          {"eval-batches", &a.eval_batches}, {"seed", &a.seed},
          {"epochs", &a.epochs},     {"no-shuffle", &a.no_shuffle}, {"train-limit", &a.train_limit}};
}

// The run flags added with image data: a checkpoint written before them has none (and is not an
// image run), so their absence keeps the defaults.
bool added_later(const std::string& flag) {
  return flag == "epochs" || flag == "no-shuffle" || flag == "train-limit";
}

const char* data_kind(const TrainArgs& a) {
  return !a.text.empty() ? "text" : !a.task.empty() ? "induction" : !a.images.empty() ? "images"
                                                                                       : "batches";
}

void need(bool ok, const std::string& what) {
  if (!ok) throw UsageError(what);
}

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

// Ranges of every flag, whether given or taken from a checkpoint.
void check_values(const TrainArgs& a) {
  arch_of(a);  // a known --arch
  need(nn::find_name(nn::kGeluNames, a.gelu).has_value(),
       "--gelu must be " + nn::one_of(nn::kGeluNames) + ", got '" + a.gelu + "'");
  need(nn::find_name(nn::kDtypeNames, a.dtype).has_value(),
       "--dtype must be " + nn::one_of(nn::kDtypeNames) + ", got '" + a.dtype + "'");
  need(a.optimizer == "adamw" || a.optimizer == "sgd",
       "--optimizer must be adamw or sgd, got '" + a.optimizer + "'");
  const std::pair<const char*, int64_t> sizes[] = {{"--layers", a.layers}, {"--heads", a.heads},
                                                   {"--embd", a.embd},     {"--block", a.block},
                                                   {"--batch", a.batch},   {"--steps", a.steps},
                                                   {"--eval-batches", a.eval_batches},
                                                   {"--hidden", a.hidden}};
  for (const auto& [flag, v] : sizes)
    need(v >= 1, std::string(flag) + " must be at least 1, got " + std::to_string(v));
  need(a.embd % a.heads == 0, "--heads " + std::to_string(a.heads) + " must divide --embd " +
                                  std::to_string(a.embd));
  need(a.kv_heads >= 0 && a.intermediate >= 0,
       "--kv-heads and --intermediate must be at least 1, got " + std::to_string(a.kv_heads) +
           " and " + std::to_string(a.intermediate));
  need(a.kv_heads == 0 || a.heads % a.kv_heads == 0,
       "--kv-heads " + std::to_string(a.kv_heads) + " must divide --heads " +
           std::to_string(a.heads) + " (each key/value head serves --heads / --kv-heads heads)");
  need(a.warmup >= 0, "--warmup must be >= 0, got " + std::to_string(a.warmup));
  need(a.epochs >= 0 && a.train_limit >= 0, "--epochs and --train-limit must not be negative, got " +
                                                 std::to_string(a.epochs) + " and " +
                                                 std::to_string(a.train_limit));
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

// The model is the checkpoint's; --arch or a model flag given again must agree with it.
void adopt_model_flags(TrainArgs& a, const Model& model) {
  const TrainArgs given = a;
  set_model_flags(model, a);
  const auto agree = [&](const char* flag, const std::string& mine, const std::string& saved) {
    need(!a.given.count(flag) || mine == saved,
         std::string("--") + flag + " " + mine + " differs from the checkpoint's " + saved +
             " (a resumed run keeps the model it was started with)");
  };
  agree("arch", given.arch, a.arch);
  for (const ModelFlag& f : model.arch().flags) agree(f.flag, flag_text(given, f), flag_text(a, f));
  // An architecture without a dropout flag (cnn, mlp) keeps its dropouts in its config, one
  // field each: a --dropout given again must be every one of them.
  const bool dropout_flag = std::any_of(model.arch().flags.begin(), model.arch().flags.end(),
                                        [](const ModelFlag& f) { return std::string(f.flag) == "dropout"; });
  if (!a.given.count("dropout") || dropout_flag) return;
  const Json config = Json::parse(model.config_json(), nullptr, false);
  std::string saved;
  bool same = true;
  for (const auto& [key, value] : config.items())
    if (key.rfind("dropout", 0) == 0 && value.is_number()) {
      saved += (saved.empty() ? "" : ", ") + key + " " + num(value.get<double>());
      same = same && value.get<double>() == a.dropout;
    }
  need(same && (!saved.empty() || a.dropout == 0),
       "--dropout " + num(a.dropout) + " differs from the checkpoint's dropouts (" +
           (saved.empty() ? std::string("none") : saved) +
           "; a resumed run keeps the model it was started with)");
}

// The data source must be the run's.
void check_same_data(const TrainArgs& a, const std::map<std::string, std::string>& metadata) {
  const auto kind = metadata.find("tapegrad.data");
  const std::string mine = data_kind(a);
  if (kind != metadata.end())
    need(kind->second == mine, "the run in " + a.resume + " trained on " + kind->second +
                                   " data, this command gives " + mine);
}

// The run flags not given again are the checkpoint's tapegrad.args.
void adopt_run_flags(TrainArgs& a, const std::map<std::string, std::string>& metadata,
                     const std::string& file) {
  const auto saved = metadata.find("tapegrad.args");
  if (saved == metadata.end()) throw IoError(file + ": no tapegrad.args in the metadata");
  const Json j = Json::parse(saved->second, nullptr, false);
  if (!j.is_object()) throw IoError(file + ": tapegrad.args is not a JSON object");
  for (auto& [flag, ref] : run_flags(a)) {
    const auto it = j.find(flag);
    if (it == j.end() && added_later(flag)) continue;
    const bool ok = it != j.end() && std::visit(
        [&](auto* p) { return json_holds<std::remove_pointer_t<decltype(p)>>(*it); }, ref);
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
}

// --images and the flags of a run by epochs go together, with an architecture that takes images.
void check_image_flags(const TrainArgs& a) {
  const bool images = !a.images.empty();
  const Arch& arch = arch_of(a);
  if (images)
    need(arch.images, std::string("--arch ") + arch.name + " trains on token sequences (--text, "
                      "--task, --batches); --images needs an image architecture (cnn or mlp)");
  else
    need(!arch.images, std::string("--arch ") + arch.name + " trains on --images DIR");
  for (const char* flag : {"epochs", "no-shuffle", "train-limit"})
    need(images || !a.given.count(flag), std::string("--") + flag + " goes with --images");
  need(!images || !a.given.count("steps"),
       "--images counts --epochs, not --steps (one update per --batch images)");
}

// A model flag of another architecture than the run's (--gelu with --arch llama) would be
// ignored: it is a usage error. --dropout is every architecture's (a config field, or
// Model::set_dropout).
void check_arch_flags(const TrainArgs& a) {
  const Arch& arch = arch_of(a);
  std::string own;
  for (const ModelFlag& f : arch.flags) own += (own.empty() ? "--" : ", --") + std::string(f.flag);
  for (const std::string& flag : a.given) {
    if (flag == "dropout" || !is_model_flag(flag)) continue;
    const bool mine = std::any_of(arch.flags.begin(), arch.flags.end(),
                                  [&](const ModelFlag& f) { return flag == f.flag; });
    need(mine, "--" + flag + " is not a flag of --arch " + arch.name + " (its model flags: " +
                   own + ")");
  }
}

}  // namespace

void apply_data_defaults(TrainArgs& a) {
  if (a.images.empty()) return;
  const auto fill = [&](const char* flag, auto& member, auto value) {
    if (!a.given.count(flag)) member = value;
  };
  // torch.optim.AdamW's defaults and pytorch/examples' batch, constant rate, no clipping.
  if (a.arch.empty()) a.arch = default_image_arch().name;
  fill("batch", a.batch, int64_t{64});
  fill("epochs", a.epochs, int64_t{1});
  fill("beta2", a.beta2, 0.999);
  fill("weight-decay", a.weight_decay, 0.01);
  fill("warmup", a.warmup, int64_t{0});
  fill("lr-min", a.lr_min, a.lr);
  fill("grad-clip", a.grad_clip, 0.0);
  fill("eval-every", a.eval_every, int64_t{0});  // an evaluation after every epoch instead
}

void check_train_flags(const TrainArgs& a) {
  const int sources = !a.text.empty() + !a.task.empty() + !a.batches.empty() + !a.images.empty();
  need(sources == 1, "give exactly one data source: --text FILE, --task induction, --batches "
                     "FILE.npy or --images DIR (got " + std::to_string(sources) + ")");
  need(a.task.empty() || a.task == "induction",
       "--task must be induction, got '" + a.task + "'");
  need(!a.out.empty(), "--out DIR is required");
  need(a.init.empty() || a.resume.empty(),
       "--init and --resume do not go together: --resume continues a run with its own weights");
  if (!a.text.empty())
    need(!a.given.count("vocab"),
         "--vocab goes with --task or --batches; a --text model's vocabulary is the text's characters");
  else if (a.resume.empty() && a.images.empty())
    need(a.vocab >= 1, std::string(a.task.empty() ? "--batches" : "--task induction") +
                           " needs --vocab V (the number of token ids), got " +
                           (a.given.count("vocab") ? std::to_string(a.vocab) : "none"));
  if (a.resume.empty()) check_optimizer_flags(a);  // else once the checkpoint's optimizer is known
  check_values(a);
  if (a.resume.empty()) {  // else the checkpoint's --arch, once known
    check_image_flags(a);
    check_arch_flags(a);
  }
  std::error_code ec;
  if (std::filesystem::exists(a.out, ec) && !std::filesystem::is_directory(a.out, ec))
    throw IoError(a.out + ": --out must be a folder, and a file of that name exists");
}

void apply_checkpoint_flags(TrainArgs& a, const Model& model,
                            const std::map<std::string, std::string>& metadata,
                            const std::string& file) {
  adopt_model_flags(a, model);
  check_same_data(a, metadata);
  adopt_run_flags(a, metadata, file);
  check_optimizer_flags(a);
  check_values(a);
  check_image_flags(a);
  check_arch_flags(a);
}

std::string run_args_json(const TrainArgs& args) {
  TrainArgs copy = args;
  Json j = Json::object();
  for (auto& [flag, ref] : run_flags(copy)) std::visit([&](auto* p) { j[flag] = *p; }, ref);
  return j.dump();
}

}  // namespace tg
