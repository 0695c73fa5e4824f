// `tapegrad train`: nanoGPT's training loop (DESIGN.md "Training from the command line").
//
//   per update s = start .. steps - 1:
//     [evaluate, when s % eval_every == 0; then checkpoint, when s > start]
//     lr = get_lr(s); loss = cross_entropy(model(x), y); backward;
//     grad_norm = clip_grad_norm (the norm before clipping, recorded even with clipping off);
//     optimizer step; zero_grad; a metrics row
//   checkpoint at the end, or after the update during which Ctrl-C came (exit 130)
//
// Every check on the flags and the input files runs before the first update, and nothing is
// written to --out before the first checkpoint, so bad input leaves --out as it was. Each file
// is written to a temporary name and renamed.
//
// On N ranks (mpirun, DESIGN.md "Data-parallel training"): every rank draws the same global
// batch and trains on its slice of rows (tools/train_dist.h); the gradients are averaged before
// clipping and the step, so every replica makes the same update and the metrics are the global
// batch's. Rank 0 alone reads --resume and --init (the others get the bytes), writes the files
// and prints. Each phase that may fail on one rank only ends in agreed(), so an error anywhere
// ends every rank with the same message instead of leaving the others waiting.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "dist/data_parallel.h"
#include "dist/reducer.h"
#include "io/file_util.h"
#include "io/safetensors.h"
#include "ops/threads.h"
#include "optim/optim.h"
#include "tools/checkpoint.h"
#include "tools/metrics.h"
#include "tools/train_args.h"
#include "tools/train_cmd.h"
#include "tools/train_data.h"
#include "tools/train_dist.h"

namespace tg {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Independent streams from one --seed (the data stream is TrainData's own, seeded with the seed).
constexpr uint64_t kDropoutStream = 0xD1B54A32D192ED03ull;

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_sigint(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the program at once
}

// Catches Ctrl-C for the duration of the loop, so the update in flight completes and is saved.
class SigintScope {
 public:
  explicit SigintScope(bool on) : on_(on) {
    g_interrupted = 0;
    if (on_) previous_ = std::signal(SIGINT, on_sigint);
  }
  ~SigintScope() {
    if (on_) std::signal(SIGINT, previous_ == SIG_ERR ? SIG_DFL : previous_);
  }
  SigintScope(const SigintScope&) = delete;
  SigintScope& operator=(const SigintScope&) = delete;

 private:
  bool on_;
  void (*previous_)(int) = SIG_DFL;
};

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string(s / 60 % 60) + "m";
}

void write_text(const fs::path& path, const std::string& text) {
  detail::TempFile f(path.string());
  f.write(text.data(), text.size());
  f.commit();
}

// Everything a run holds between updates.
struct Run {
  TrainArgs args;  // after the checkpoint's flags were applied
  nn::GPTConfig config;
  std::unique_ptr<TrainData> data;
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<dist::GradientReducer> reducer;  // averages the gradients over the ranks
  int64_t start = 0;                // updates done before this invocation
  std::vector<MetricsRow> rows;     // one per update done
  double elapsed_before = 0;        // seconds spent by earlier invocations
};

// The run's state after `done` updates, into --out.
void save(Run& run, int64_t done, double elapsed) {
  const fs::path out(run.args.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw IoError(run.args.out + ": cannot create the output folder: " + ec.message());

  NamedTensors state = run.opt->state_dict();
  state.emplace_back("step", from_indices({done}, {}));
  state.emplace_back("data.position", from_indices({run.data->position()}, {}));
  state.emplace_back("rng.data", ckpt::rng_state(run.data->rng()));
  state.emplace_back("rng.dropout", ckpt::rng_state(run.model->dropout_rng()));
  const std::map<std::string, std::string> meta = {
      {"tapegrad.args", run_args_json(run.args)},
      {"tapegrad.data", run.data->kind_name()},
      {"tapegrad.step", std::to_string(done)},
      {"tapegrad.elapsed_s", fmt("%.17g", elapsed)}};
  write_safetensors((out / "train_state.safetensors").string(), state, meta);
  write_text(out / "metrics.csv", metrics_csv(run.rows));
  const std::string title = "tapegrad train: " + std::string(run.data->kind_name()) + ", " +
                            std::to_string(run.config.n_layer) + " layers, n_embd " +
                            std::to_string(run.config.n_embd) + ", " +
                            std::to_string(done) + " updates";
  write_text(out / "loss.svg", loss_svg(run.rows, title));
  ckpt::write_model((out / "model.safetensors").string(), *run.model, run.data->vocab(), done);
}

// --resume: the checkpoint's model, flags, optimizer state, generators and metrics.
void restore(Run& run, const ckpt::ModelFile& model_file, const SafeTensors& state,
             const std::string& state_path, const std::string& metrics_bytes) {
  ckpt::load_weights(*run.model, model_file.tensors, run.args.resume + "/model.safetensors");
  NamedTensors optim_state;
  for (const auto& [name, t] : state.tensors)
    if (name.rfind("optim.", 0) == 0) optim_state.emplace_back(name, t);
  try {
    run.opt->load_state_dict(optim_state);
  } catch (const ValueError& e) {
    throw IoError(state_path + ": " + e.what());
  }
  ckpt::set_rng_state(run.data->rng(), ckpt::get_tensor(state.tensors, "rng.data", state_path),
                      state_path + " rng.data");
  ckpt::set_rng_state(run.model->dropout_rng(),
                      ckpt::get_tensor(state.tensors, "rng.dropout", state_path),
                      state_path + " rng.dropout");
  run.data->set_position(ckpt::get_count(state.tensors, "data.position", state_path));
  const std::string metrics_path = run.args.resume + "/metrics.csv";
  std::vector<MetricsRow> rows = parse_metrics_csv(metrics_bytes, metrics_path);
  if (static_cast<int64_t>(rows.size()) < run.start)
    throw IoError(metrics_path + ": " + std::to_string(rows.size()) + " rows, the checkpoint has " +
                  std::to_string(run.start) + " updates");
  rows.resize(static_cast<std::size_t>(run.start));
  run.rows = std::move(rows);
  if (const auto e = state.metadata.find("tapegrad.elapsed_s"); e != state.metadata.end())
    run.elapsed_before = std::strtod(e->second.c_str(), nullptr);
}

// The files of --resume and --init. Rank 0 alone reads them and sends the bytes to the others:
// rank 0 wrote the checkpoint, so on machines without a shared filesystem only it has one.
struct RootFiles {
  std::string model, state, metrics, init;
};

// Checks the flags (every rank) and reads the files (rank 0); collective.
RootFiles read_root_files(const TrainArgs& flags, dist::Communicator& comm) {
  RootFiles f;
  agreed(comm, [&] {
    check_train_flags(flags);
    if (comm.rank() != 0) return;
    if (!flags.resume.empty()) {
      std::error_code ec;
      if (!fs::is_regular_file(fs::path(flags.resume) / "model.safetensors", ec))
        throw IoError(flags.resume + ": nothing to resume: no model.safetensors in it");
      f.model = detail::read_file(flags.resume + "/model.safetensors");
      f.state = detail::read_file(flags.resume + "/train_state.safetensors");
      f.metrics = detail::read_file(flags.resume + "/metrics.csv");
    }
    if (!flags.init.empty()) f.init = detail::read_file(flags.init);
  });
  for (std::string* bytes : {&f.model, &f.state, &f.metrics, &f.init})
    broadcast_string(comm, *bytes);
  return f;
}

// Builds the run from the flags (and the checkpoint with --resume), all checks included.
Run prepare(const TrainArgs& flags, const RootFiles& files, int ranks) {
  Run run;
  run.args = flags;
  std::optional<ckpt::ModelFile> model_file;
  std::optional<SafeTensors> state;
  const std::string state_path = flags.resume + "/train_state.safetensors";
  if (!flags.resume.empty()) {
    model_file = ckpt::parse_model(files.model, flags.resume + "/model.safetensors");
    state = parse_safetensors(files.state, state_path);
    run.start = ckpt::get_count(state->tensors, "step", state_path);
    if (model_file->step != run.start)
      throw IoError(flags.resume + ": model.safetensors is from update " +
                    std::to_string(model_file->step) + " but train_state.safetensors from " +
                    std::to_string(run.start) + " (an interrupted save?)");
    apply_checkpoint_flags(run.args, model_file->config, state->metadata, state_path);
    if (run.start >= run.args.steps)
      throw UsageError("--steps " + std::to_string(run.args.steps) + ": the run in " +
                       flags.resume + " has done " + std::to_string(run.start) +
                       " updates already; ask for more steps to continue it");
  }
  const TrainArgs& a = run.args;
  if (a.threads > 0)
    set_num_threads(a.threads);
  else if (ranks > 1)  // ranks sharing a machine share its cores, rather than each taking all
    set_num_threads(std::max(1, num_threads() / ranks_on_this_machine()));

  const bool need_val = a.eval_every > 0;
  if (!a.text.empty()) {
    run.data = std::make_unique<TrainData>(TrainData::text(
        a.text, model_file ? model_file->vocab : std::nullopt, a.batch, a.block, need_val, a.seed));
  } else if (!a.task.empty()) {
    run.data = std::make_unique<TrainData>(TrainData::induction(a.batch, a.block, a.vocab, a.seed));
  } else {
    run.data = std::make_unique<TrainData>(TrainData::batches(a.batches, a.vocab, a.block, a.seed));
    if (a.given.count("batch") && a.batch != run.data->batch_size())
      throw ValueError(a.batches + ": batches of " + std::to_string(run.data->batch_size()) +
                       " rows, but --batch " + std::to_string(a.batch));
  }
  check_batch_splits(run.data->batch_size(), ranks);
  run.config = model_config(
      a, run.data->vocab() ? data::CharTokenizer::from_vocab(*run.data->vocab()).size() : a.vocab);
  if (model_file && model_file->vocab && run.data->kind() != TrainData::Kind::text)
    throw UsageError(flags.resume + " holds a text model; resume it with --text");

  Rng init_rng(a.seed);
  run.model = std::make_unique<nn::GPT>(run.config, init_rng);
  run.model->set_seed(a.seed ^ kDropoutStream);
  if (!a.init.empty())
    ckpt::load_weights(*run.model, parse_safetensors(files.init, a.init).tensors, a.init);
  run.model->train();

  const NamedTensors params = run.model->named_parameters();
  if (a.optimizer == "adamw")
    run.opt = std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions{a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, 2});
  else
    run.opt = std::make_unique<optim::SGD>(params, a.lr, a.momentum, a.weight_decay, 2);
  if (model_file) restore(run, *model_file, *state, state_path, files.metrics);
  return run;
}

// One line of progress: redrawn in place on a terminal, else printed every 10% of the steps.
class Progress {
 public:
  Progress(std::ostream& err, int64_t start, int64_t steps, bool tty)
      : err_(err), start_(start), steps_(steps), tty_(tty), t0_(Clock::now()) {}
  void update(const MetricsRow& r) {
    const int64_t done = r.step + 1;
    const int64_t tenth = std::max<int64_t>(1, steps_ / 10);
    if (!tty_ && done % tenth != 0 && done != steps_ && done != start_ + 1) return;
    const double spent = std::chrono::duration<double>(Clock::now() - t0_).count();
    const double eta = spent / static_cast<double>(done - start_) * static_cast<double>(steps_ - done);
    std::string line = "step " + std::to_string(done) + "/" + std::to_string(steps_) + "  loss " +
                       fmt("%.4f", r.loss) + "  " + fmt("%.0f", r.tokens_per_s) + " tok/s  ETA " +
                       duration(eta);
    if (tty_)
      err_ << "\r\033[K" << line << std::flush;
    else
      err_ << line << "\n";
  }
  void note(const std::string& line) {
    err_ << (tty_ ? "\r\033[K" : "") << line << "\n" << std::flush;
  }
  void finish() {
    if (tty_) err_ << "\n";
  }

 private:
  std::ostream& err_;
  int64_t start_, steps_;
  bool tty_;
  Clock::time_point t0_;
};

// Evaluation, each rank on its share of the batches, summed over ranks. Collective.
EvalResult evaluate(Run& run, dist::Communicator& comm) {
  EvalSums sums;
  agreed(comm, [&] {
    sums = run.data->evaluate_part(*run.model, run.args.eval_batches, comm.rank(), comm.size());
  });
  if (comm.size() > 1) {
    double v[3] = {sums.loss, sums.correct, sums.predictable};
    comm.allreduce_sum(v, 3);
    sums = {v[0], v[1], v[2]};
  }
  return finish_eval(sums, run.args.eval_batches);
}

// Forward and backward of this rank's slice of the next global batch, the gradients averaged
// over ranks as the backward goes (GradientReducer: a bucket's allreduce starts when its
// parameters' gradients are ready). Returns the global batch's loss. `interrupted` becomes
// whether Ctrl-C reached any rank, so that every rank stops after the same update. Collective.
double forward_backward(Run& run, int64_t s, dist::Communicator& comm, bool& interrupted) {
  const int rank = comm.rank(), ranks = comm.size();
  const data::Batch batch = run.data->next();  // the whole global batch, on every rank
  if (ranks > 1 && run.args.dropout > 0)
    run.model->set_seed(rank_dropout_seed(run.args.seed, s, rank));
  double share = 0;
  agreed(comm, [&] {
    // An exception before finish() still completes the pass's allreduces on this rank, so the
    // ranks' collectives stay in step until agreed() tells them all.
    dist::GradientReducer::Pass pass = run.reducer->begin();  // one rank: does nothing
    const SliceLoss part = slice_loss(*run.model, batch, rank, ranks);
    share = part.share;
    if (part.backprop.defined()) part.backprop.backward();
    pass.finish();
  });
  double sums[2] = {share, g_interrupted ? 1.0 : 0.0};
  if (ranks > 1) comm.allreduce_sum(sums, 2);
  interrupted = sums[1] > 0;
  return sums[0];
}

}  // namespace

int run_train(const TrainArgs& flags, std::ostream& err) {
  dist::LocalCommunicator one;
  return run_train(flags, err, one);
}

int run_train(const TrainArgs& flags, std::ostream& root_err, dist::Communicator& comm) {
  const bool root = comm.rank() == 0;
  std::ostream quiet(nullptr);  // the other ranks' progress goes nowhere
  std::ostream& err = root ? root_err : quiet;
  const RootFiles files = read_root_files(flags, comm);
  Run run;
  agreed(comm, [&] { run = prepare(flags, files, comm.size()); });
  // Every rank built the same weights from the same seed and bytes; the broadcast makes that a
  // guarantee (and checks that every replica has the same layout).
  if (comm.size() > 1) dist::broadcast_parameters(*run.model, comm);
  // Its buckets are a second copy of the gradients: an allocation that may fail on one rank.
  agreed(comm, [&] { run.reducer = std::make_unique<dist::GradientReducer>(*run.model, comm); });
  const TrainArgs& a = run.args;
  const NamedTensors params = run.model->named_parameters();
  // The whole job's tokens per update: the global batch.
  const double tokens = static_cast<double>(run.data->batch_size() * run.data->block_size());
  Progress progress(err, run.start, a.steps,
                    root && &root_err == &std::cerr && ::isatty(STDERR_FILENO));
  SigintScope sigint(a.handle_sigint);
  const Clock::time_point t0 = Clock::now();
  const auto elapsed = [&] {
    return run.elapsed_before + std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // A failed write on rank 0 must end the other ranks too.
  const auto save_all = [&](int64_t done) { agreed(comm, [&] { if (root) save(run, done, elapsed()); }); };

  for (int64_t s = run.start; s < a.steps; ++s) {
    MetricsRow row;
    row.step = s;
    if (a.eval_every > 0 && s % a.eval_every == 0) {
      const EvalResult ev = evaluate(run, comm);
      row.val_loss = ev.val_loss;
      if (ev.accuracy) row.accuracy = *ev.accuracy;
      progress.note("step " + std::to_string(s) + ": val_loss " + fmt("%.4f", ev.val_loss) +
                    (ev.accuracy ? "  accuracy " + fmt("%.4f", *ev.accuracy) : ""));
      if (s > run.start) save_all(s);
    }
    const Clock::time_point u0 = Clock::now();
    row.lr = optim::get_lr(s, a.lr, a.lr_min, a.warmup, a.steps);
    run.opt->set_lr(row.lr);
    bool interrupted = false;
    row.loss = forward_backward(run, s, comm, interrupted);
    // The gradients are the same on every rank now, so the norm, the clipping, the check below
    // and the step are too. The norm before clipping is recorded whether or not clipping is on.
    row.grad_norm = a.grad_clip > 0 ? optim::clip_grad_norm(params, a.grad_clip)
                                    : optim::grad_norm(params);
    if (!std::isfinite(row.loss) || !std::isfinite(row.grad_norm))
      throw ValueError("update " + std::to_string(s) + ": the loss (" + fmt("%g", row.loss) +
                       ") or the gradient norm (" + fmt("%g", row.grad_norm) +
                       ") is not finite; the run diverged, try a lower --lr");
    run.opt->step();
    run.opt->zero_grad();
    const double dt = std::chrono::duration<double>(Clock::now() - u0).count();
    row.tokens_per_s = dt > 0 ? tokens / dt : std::numeric_limits<double>::quiet_NaN();
    row.elapsed_s = elapsed();
    run.rows.push_back(row);
    progress.update(row);
    if (interrupted && s + 1 < a.steps) {
      save_all(s + 1);
      progress.finish();
      err << "tapegrad: interrupted after update " << s + 1 << " of " << a.steps << "; saved to "
          << a.out << "; continue with: "
          << (a.command_line.empty() ? "the same flags and" : a.command_line) << " --resume "
          << a.out << "\n";
      return 130;
    }
  }
  save_all(a.steps);
  progress.finish();
  err << "tapegrad: " << a.steps << (a.steps == 1 ? " update" : " updates") << " done; wrote model.safetensors, "
      << "train_state.safetensors, metrics.csv and loss.svg to " << a.out << "\n";
  return 0;
}

}  // namespace tg
