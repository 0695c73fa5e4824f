// `tapegrad train`: nanoGPT's training loop.
//
//   per update s = start .. steps - 1:
//     [evaluate, when s % eval_every == 0; then checkpoint, when s > start]
//     lr = get_lr(s); loss = cross_entropy(model(x), y); backward;
//     grad_norm = clip_grad_norm (the norm before clipping, recorded even with clipping off);
//     optimizer step; zero_grad; a metrics row
//     images (--images, by epochs): after an epoch's last update, the test set on that row;
//     then checkpoint
//   checkpoint at the end, or after the update during which Ctrl-C came (exit 130)
//
// The run is set up, and saved, by tools/train_run.h; the model is any architecture's (through
// tools/arch.h). Every check on the flags and the input files runs before the first update, and
// nothing is written to --out before the first checkpoint, so bad input leaves --out as it was. Each file
// is written to a temporary name and renamed, train_state.safetensors (the checkpoint, all that
// --resume reads) first, so a kill at any moment leaves a folder that resumes.
//
// On N ranks (mpirun): every rank draws the same global
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
#include <iostream>
#include <limits>
#include <memory>

#include <tapegrad/dist/data_parallel.h>
#include <tapegrad/dist/reducer.h>
#include <tapegrad/optim/optim.h>
#include "tools/train_args.h"
#include "tools/train_cmd.h"
#include "tools/train_dist.h"
#include "tools/train_run.h"

namespace tg {

namespace {

using Clock = std::chrono::steady_clock;

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

// One line of progress: redrawn in place on a terminal, else printed every 10% of the steps.
class Progress {
 public:
  // `unit` names what the rate counts: "tok/s" (tokens), "img/s" (images).
  Progress(std::ostream& err, int64_t start, int64_t steps, bool tty, const char* unit)
      : err_(err), start_(start), steps_(steps), tty_(tty), unit_(unit), t0_(Clock::now()) {}
  void update(const MetricsRow& r) {
    const int64_t done = r.step + 1;
    const int64_t tenth = std::max<int64_t>(1, steps_ / 10);
    if (!tty_ && done % tenth != 0 && done != steps_ && done != start_ + 1) return;
    const double spent = std::chrono::duration<double>(Clock::now() - t0_).count();
    const double eta = spent / static_cast<double>(done - start_) * static_cast<double>(steps_ - done);
    std::string line = "step " + std::to_string(done) + "/" + std::to_string(steps_) + "  loss " +
                       fmt("%.4f", r.loss) + "  " + fmt("%.0f", r.tokens_per_s) + " " + unit_ + "  ETA " +
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
  const char* unit_;
  Clock::time_point t0_;
};

// Evaluation, each rank on its share of the batches, summed over ranks (images: the whole test
// set; else --eval-batches). Collective.
EvalResult evaluate(Run& run, dist::Communicator& comm) {
  EvalSums sums;
  const int64_t n = run.data->eval_batches(run.args.eval_batches);
  agreed(comm, [&] { sums = run.data->evaluate_part(*run.model, n, comm.rank(), comm.size()); });
  if (comm.size() > 1) {
    double v[3] = {sums.loss, sums.correct, sums.predictable};
    comm.allreduce_sum(v, 3);
    sums = {v[0], v[1], v[2]};
  }
  return finish_eval(sums, n);
}

// Forward and backward of this rank's slice of the next global batch, the gradients averaged
// over ranks as the backward goes (GradientReducer: a bucket's allreduce starts when its
// parameters' gradients are ready). Returns the global batch's loss. `interrupted` becomes
// whether Ctrl-C reached any rank, so that every rank stops after the same update. Collective.
double forward_backward(Run& run, int64_t s, dist::Communicator& comm, bool& interrupted) {
  const int rank = comm.rank(), ranks = comm.size();
  const data::Batch batch = run.data->next();  // the whole global batch, on every rank
  // Every rank draws its own dropout masks (reseeded whether or not the flag set a dropout: a
  // model may keep dropouts of its own, as the cnn's Net does).
  if (ranks > 1) run.model->dropout_rng() = Rng(rank_dropout_seed(run.args.seed, s, rank));
  double share = 0;
  agreed(comm, [&] {
    // An exception before finish() still completes the pass's allreduces on this rank, so the
    // ranks' collectives stay in step until agreed() tells them all.
    dist::GradientReducer::Pass pass = run.reducer->begin();  // one rank: does nothing
    // (Only a full batch: an epoch's short last one must not be the step recorded.)
    const bool full = batch.x.size(0) == run.data->batch_size();
    if (run.step && full && run.step->fits({batch.x, batch.y})) {
      // loss = model.batch_loss(batch); loss.backward(), bit for bit, on the recorded tape.
      share = (*run.step)({batch.x, batch.y}).item();
    } else {
      const SliceLoss part = slice_loss(*run.model, batch, rank, ranks);
      share = part.share;
      if (part.backprop.defined()) part.backprop.backward();
    }
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

int run_train(const TrainArgs& given, std::ostream& root_err, dist::Communicator& comm) {
  TrainArgs flags = given;
  apply_data_defaults(flags);
  const bool root = comm.rank() == 0;
  std::ostream quiet(nullptr);  // the other ranks' progress goes nowhere
  std::ostream& err = root ? root_err : quiet;
  const RootFiles files = read_root_files(flags, comm);
  Run run;
  agreed(comm, [&] { run = prepare(flags, files, comm.size()); });
  // Every rank built the same weights from the same seed and bytes; the broadcast makes that a
  // guarantee (and checks that every replica has the same layout).
  if (comm.size() > 1) dist::broadcast_parameters(run.model->module(), comm);
  // Its buckets are a second copy of the gradients: an allocation that may fail on one rank.
  agreed(comm, [&] {
    run.reducer = std::make_unique<dist::GradientReducer>(run.model->module(), comm);
  });
  const TrainArgs& a = run.args;
  // One process replays its step (a StaticStep: the same ops on the same shapes each update);
  // an update whose batch has other shapes (an epoch's short last one) runs eagerly.
  if (comm.size() == 1 && !a.checkpoint_blocks && !a.no_replay) {
    const Model& model = *run.model;
    run.step = std::make_unique<StaticStep>([&model](const std::vector<Tensor>& in) {
      return model.batch_loss({in[0], in[1]});
    });
  }
  const NamedTensors params = run.model->module().named_parameters();
  // The whole job's tokens per update: the global batch.
  const double tokens = static_cast<double>(run.data->batch_size() * run.data->block_size());
  Progress progress(err, run.start, a.steps,
                    root && &root_err == &std::cerr && ::isatty(STDERR_FILENO),
                    run.data->steps_per_epoch() > 0 ? "img/s" : "tok/s");
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
    const int64_t per_epoch = run.data->steps_per_epoch();
    const bool epoch_done = per_epoch > 0 && (s + 1) % per_epoch == 0;
    if (epoch_done) {  // the test set after the epoch's last update, on that update's row
      const EvalResult ev = evaluate(run, comm);
      row.epoch = static_cast<double>((s + 1) / per_epoch);
      row.test_loss = ev.val_loss;
      if (ev.accuracy) row.test_accuracy = *ev.accuracy;
      progress.note("epoch " + std::to_string((s + 1) / per_epoch) + ": test_loss " +
                    fmt("%.4f", ev.val_loss) + "  test_accuracy " + fmt("%.4f", row.test_accuracy));
    }
    run.rows.push_back(row);
    progress.update(row);
    if (epoch_done && !interrupted && s + 1 < a.steps) save_all(s + 1);
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
  const int64_t replayed = run.step ? run.step->replays() : 0;
  err << "tapegrad: " << a.steps << (a.steps == 1 ? " update" : " updates") << " done"
      << (replayed > 0 ? " (" + std::to_string(replayed) + " replayed)" : "")
      << "; wrote model.safetensors, "
      << (run.model->pretrained_config() ? "config.json, " : "")
      << "train_state.safetensors, metrics.csv and loss.svg to " << a.out << "\n";
  return 0;
}

}  // namespace tg
