#include "tools/train_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include <tapegrad/data/tokenizer.h>
#include <tapegrad/io/file_util.h>
#include <tapegrad/io/safetensors.h>
#include <tapegrad/ops/threads.h>
#include "tools/checkpoint.h"
#include "tools/train_args.h"
#include "tools/train_dist.h"

namespace tg {

namespace {

namespace fs = std::filesystem;

// Independent streams from one --seed (the data stream is TrainData's own, seeded with the seed).
constexpr uint64_t kDropoutStream = 0xD1B54A32D192ED03ull;

// What save() writes into --out, the checkpoint first.
constexpr const char* kFiles[] = {"train_state.safetensors", "model.safetensors", "metrics.csv",
                                  "loss.svg", "config.json"};

void write_text(const fs::path& path, const std::string& text) {
  detail::TempFile f(path.string());
  f.write(text.data(), text.size());
  f.commit();
}

std::string num17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// --resume's checkpoint: its model (built from its config, the file's weights not yet in it),
// its train state and the rows of metrics.csv it has done.
struct Checkpoint {
  ckpt::ModelFile model;
  SafeTensors state;
  std::string state_path;
  std::vector<MetricsRow> rows;
};

// A train state written before it held the weights: the model and the rows come from the
// model.safetensors and metrics.csv beside it, which must be from the same update.
void open_old_checkpoint(Checkpoint& c, const RootFiles& files, const std::string& dir,
                         int64_t step) {
  c.model = ckpt::parse_model(files.model, dir + "/model.safetensors");
  if (c.model.step != step)
    throw IoError(dir + ": model.safetensors is from update " + std::to_string(c.model.step) +
                  " but train_state.safetensors from " + std::to_string(step) +
                  " (an interrupted save?)");
  const std::string metrics_path = dir + "/metrics.csv";
  c.rows = parse_metrics_csv(files.metrics, metrics_path);
  if (static_cast<int64_t>(c.rows.size()) < step)
    throw IoError(metrics_path + ": " + std::to_string(c.rows.size()) +
                  " rows, the checkpoint has " + std::to_string(step) + " updates");
  c.rows.resize(static_cast<std::size_t>(step));
}

// Parses --resume's train state (and, for an old one, the files beside it) and takes the
// checkpoint's model and run flags into run.args.
Checkpoint open_checkpoint(Run& run, const RootFiles& files) {
  const std::string dir = run.args.resume;
  Checkpoint c;
  c.state_path = dir + "/train_state.safetensors";
  c.state = parse_safetensors(files.state, c.state_path);
  run.start = ckpt::get_count(c.state.tensors, "step", c.state_path);
  if (ckpt::holds_model(c.state.metadata)) {
    c.model = ckpt::model_from(c.state.metadata, ckpt::model_tensors(c.state.tensors), c.state_path);
    if (c.model.step != run.start)
      throw IoError(c.state_path + ": tapegrad.step " + std::to_string(c.model.step) +
                    " but tensor 'step' " + std::to_string(run.start));
    c.rows = metrics_rows(ckpt::get_tensor(c.state.tensors, "metrics", c.state_path), c.state_path);
    if (static_cast<int64_t>(c.rows.size()) != run.start)
      throw IoError(c.state_path + ": " + std::to_string(c.rows.size()) +
                    " metrics rows, the checkpoint has " + std::to_string(run.start) + " updates");
  } else {
    open_old_checkpoint(c, files, dir, run.start);
  }
  apply_checkpoint_flags(run.args, *c.model.model, c.state.metadata, c.state_path);
  return c;
}

// A run resumed at its last update does none: its files are written again from the checkpoint
// (a kill between the checkpoint's rename and theirs may have left them an update behind).
void check_steps_left(const Run& run) {
  const TrainArgs& a = run.args;
  if (run.start <= a.steps) return;
  const std::string asked = a.epochs > 0 ? "--epochs " + std::to_string(a.epochs)
                                         : "--steps " + std::to_string(a.steps);
  throw UsageError(asked + ": the run in " + a.resume + " has done " +
                   std::to_string(run.start) + " updates already; ask for more " +
                   (a.epochs > 0 ? "epochs" : "steps") + " to continue it");
}

void set_threads(const TrainArgs& a, int ranks) {
  if (a.threads > 0)
    set_num_threads(a.threads);
  else if (ranks > 1)  // ranks sharing a machine share its cores, rather than each taking all
    set_num_threads(std::max(1, num_threads() / ranks_on_this_machine()));
}

// The data source of the flags; `vocab` is a resumed text model's.
std::unique_ptr<TrainData> make_data(const TrainArgs& a, const std::optional<std::string>& vocab) {
  if (!a.text.empty())
    return std::make_unique<TrainData>(
        TrainData::text(a.text, vocab, a.batch, a.block, /*need_val=*/a.eval_every > 0, a.seed));
  if (!a.task.empty())
    return std::make_unique<TrainData>(TrainData::induction(a.batch, a.block, a.vocab, a.seed));
  if (!a.images.empty()) {
    const Dtype dtype = a.dtype == "f64" ? Dtype::f64 : Dtype::f32;  // check_train_flags knows it
    return std::make_unique<TrainData>(
        TrainData::images(a.images, dtype, a.batch, !a.no_shuffle, a.train_limit, a.seed));
  }
  auto data = std::make_unique<TrainData>(TrainData::batches(a.batches, a.vocab, a.block, a.seed));
  if (a.given.count("batch") && a.batch != data->batch_size())
    throw ValueError(a.batches + ": batches of " + std::to_string(data->batch_size()) +
                     " rows, but --batch " + std::to_string(a.batch));
  return data;
}

// A new model of --arch from the model flags, its vocabulary the text's where there is one.
std::unique_ptr<Model> new_model(const TrainArgs& a, const TrainData& data) {
  TrainArgs flags = a;
  if (data.vocab()) flags.vocab = data::CharTokenizer::from_vocab(*data.vocab()).size();
  const Arch& arch = arch_of(flags);
  Rng init_rng(a.seed);
  std::unique_ptr<Model> model = arch.build(config_json_of(arch, flags), init_rng);
  const bool dropout_in_config = std::any_of(arch.flags.begin(), arch.flags.end(), [](const ModelFlag& f) {
    return std::string(f.flag) == "dropout";
  });
  if (a.given.count("dropout") && !dropout_in_config) model->set_dropout(a.dropout);
  return model;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainArgs& a, const NamedTensors& params) {
  if (a.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions{a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, 2});
  return std::make_unique<optim::SGD>(params, a.lr, a.momentum, a.weight_decay, 2);
}

// --resume: the checkpoint's weights, optimizer state, generators and metrics.
void restore(Run& run, Checkpoint& c) {
  const std::string weights_path = ckpt::holds_model(c.state.metadata)
                                       ? c.state_path
                                       : run.args.resume + "/model.safetensors";
  ckpt::load_weights(*run.model, std::move(c.model.tensors), weights_path);
  NamedTensors optim_state;
  for (const auto& [name, t] : c.state.tensors)
    if (name.rfind("optim.", 0) == 0) optim_state.emplace_back(name, t);
  try {
    run.opt->load_state_dict(optim_state);
  } catch (const ValueError& e) {
    throw IoError(c.state_path + ": " + e.what());
  }
  const NamedTensors& state = c.state.tensors;
  const auto restore_rng = [&](Rng& rng, const std::string& name) {
    ckpt::set_rng_state(rng, ckpt::get_tensor(state, name, c.state_path), c.state_path + " " + name);
  };
  restore_rng(run.data->rng(), "rng.data");
  restore_rng(run.model->dropout_rng(), "rng.dropout");
  run.data->set_position(ckpt::get_count(state, "data.position", c.state_path));
  run.rows = std::move(c.rows);
  if (const auto e = c.state.metadata.find("tapegrad.elapsed_s"); e != c.state.metadata.end())
    run.elapsed_before = std::strtod(e->second.c_str(), nullptr);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// What a save killed midway leaves behind: TempFile's "NAME.tmpPID-N" beside one of our files,
// from a process other than this one (which writes one file at a time and renames it at once).
void remove_stale_temps(const fs::path& out) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (const char* file : kFiles) {
      const std::string prefix = std::string(file) + ".tmp";
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string tail = name.substr(prefix.size());  // "PID-N"
      const std::size_t dash = tail.find('-');
      if (dash == std::string::npos || !all_digits(tail.substr(0, dash)) ||
          !all_digits(tail.substr(dash + 1)) || tail.substr(0, dash) == std::to_string(::getpid()))
        continue;
      stale.push_back(it->path());
    }
  }
  for (const fs::path& p : stale) fs::remove(p, ec);  // one we cannot remove is only clutter
}

}  // namespace

RootFiles read_root_files(const TrainArgs& flags, dist::Communicator& comm) {
  RootFiles f;
  agreed(comm, [&] {
    check_train_flags(flags);
    if (comm.rank() != 0) return;
    if (!flags.resume.empty()) {
      const fs::path dir(flags.resume);
      std::error_code ec;
      if (!fs::is_regular_file(dir / "train_state.safetensors", ec))
        throw IoError(flags.resume + ": nothing to resume: no train_state.safetensors in it");
      const std::string state_path = (dir / "train_state.safetensors").string();
      f.state = detail::read_file(state_path);
      // A train state of an older tapegrad, without the weights: the files beside it too.
      if (!ckpt::holds_model(parse_safetensors(f.state, state_path).metadata)) {
        f.model = detail::read_file((dir / "model.safetensors").string());
        f.metrics = detail::read_file((dir / "metrics.csv").string());
      }
    }
    if (!flags.init.empty()) f.init = detail::read_file(flags.init);
  });
  for (std::string* bytes : {&f.model, &f.state, &f.metrics, &f.init})
    broadcast_string(comm, *bytes);
  return f;
}

Run prepare(const TrainArgs& flags, const RootFiles& files, int ranks) {
  Run run;
  run.args = flags;
  std::optional<Checkpoint> checkpoint;
  if (!flags.resume.empty()) checkpoint = open_checkpoint(run, files);
  const TrainArgs& a = run.args;
  set_threads(a, ranks);
  run.data = make_data(a, checkpoint ? checkpoint->model.vocab : std::nullopt);
  if (const int64_t per_epoch = run.data->steps_per_epoch(); per_epoch > 0) {
    if (a.epochs > std::numeric_limits<int64_t>::max() / per_epoch)
      throw UsageError("--epochs " + std::to_string(a.epochs) + " of " + std::to_string(per_epoch) +
                       " updates each is more updates than a run can count");
    run.args.steps = a.epochs * per_epoch;
  }
  check_steps_left(run);
  check_batch_splits(run.data->batch_size(), ranks);
  if (checkpoint && checkpoint->model.vocab && run.data->kind() != TrainData::Kind::text)
    throw UsageError(flags.resume + " holds a text model; resume it with --text");

  run.model = checkpoint ? std::move(checkpoint->model.model) : new_model(a, *run.data);
  run.model->dropout_rng() = Rng(a.seed ^ kDropoutStream);
  if (a.checkpoint_blocks) run.model->set_checkpoint_blocks();
  if (!a.init.empty())
    ckpt::load_weights(*run.model, parse_safetensors(files.init, a.init).tensors, a.init);
  run.model->module().train();
  run.opt = make_optimizer(a, run.model->module().named_parameters());
  if (checkpoint) restore(run, *checkpoint);
  return run;
}

void save(Run& run, int64_t done, double elapsed) {
  const fs::path out(run.args.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw IoError(run.args.out + ": cannot create the output folder: " + ec.message());
  remove_stale_temps(out);

  NamedTensors state = run.opt->state_dict();
  state.emplace_back("step", from_indices({done}, {}));
  state.emplace_back("data.position", from_indices({run.data->position()}, {}));
  state.emplace_back("rng.data", ckpt::rng_state(run.data->rng()));
  state.emplace_back("rng.dropout", ckpt::rng_state(run.model->dropout_rng()));
  state.emplace_back("metrics", metrics_tensor(run.rows));
  std::map<std::string, std::string> meta = {{"tapegrad.args", run_args_json(run.args)},
                                             {"tapegrad.data", run.data->kind_name()},
                                             {"tapegrad.elapsed_s", num17(elapsed)}};
  ckpt::add_model(state, meta, *run.model, run.data->vocab(), done, ckpt::kWeightsPrefix);
  // The checkpoint: once renamed, the run resumes from here whatever happens to the rest.
  write_safetensors((out / "train_state.safetensors").string(), state, meta);
  ckpt::write_model((out / "model.safetensors").string(), *run.model, run.data->vocab(), done);
  if (const auto config = run.model->pretrained_config()) write_text(out / "config.json", *config + "\n");
  write_text(out / "metrics.csv", metrics_csv(run.rows, run.data->steps_per_epoch() > 0));
  const std::string title = "tapegrad train: " + std::string(run.data->kind_name()) + ", " +
                            run.model->summary() + ", " + std::to_string(done) + " updates";
  write_text(out / "loss.svg", loss_svg(run.rows, title));
}

}  // namespace tg
