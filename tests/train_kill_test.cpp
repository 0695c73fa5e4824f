// The checkpoint of `tapegrad train` as one unit, tried the way a user's run fails: the real
// program as a subprocess, killed with SIGKILL at seeded random moments of a run that
// checkpoints every 2 updates, resumed after each kill, ends with the weights and metrics rows
// of the run never stopped, bit for bit, and a folder holding its four files and nothing else.
// A folder whose train state is of the older kind (the weights in model.safetensors only)
// still resumes exactly.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include <tapegrad/io/safetensors.h>

namespace tg {
namespace {

namespace fs = std::filesystem;
using test::slurp;
using test::spit;
using test::TempDir;

const std::string kExe = TAPEGRAD_EXE;
using Clock = std::chrono::steady_clock;

// The metrics rows without the timing columns (tokens_per_s, elapsed_s), which differ by run.
std::string metrics_without_timing(const fs::path& dir) {
  std::string out;
  std::istringstream in(slurp(dir / "metrics.csv"));
  for (std::string line; std::getline(in, line);) {
    std::size_t end = 0;  // the 6th comma: after step,lr,loss,grad_norm,val_loss,accuracy
    for (int comma = 0; comma < 6 && end != std::string::npos; ++comma)
      end = line.find(',', comma == 0 ? 0 : end + 1);
    out += line.substr(0, end) + "\n";
  }
  return out;
}

// Starts the program with `args`, stdout and stderr into `err`; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& err) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::vector<char*> argv = {const_cast<char*>(kExe.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  if (std::freopen(err.c_str(), "w", stderr) == nullptr ||
      std::freopen("/dev/null", "w", stdout) == nullptr)
    ::_exit(99);
  ::execv(kExe.c_str(), argv.data());
  ::_exit(98);
}

// A small real run that checkpoints every 2 updates (each evaluation saves), with dropout so
// the dropout generator has to survive the kills too.
std::vector<std::string> run_flags(const fs::path& text, const fs::path& out) {
  return {"train", "--text", text, "--out", out, "--layers", "2", "--heads", "2", "--embd",
          "16", "--block", "16", "--batch", "4", "--steps", "200", "--eval-every", "2",
          "--eval-batches", "2", "--dropout", "0.1", "--threads", "1", "--seed", "3"};
}

// run_flags with `steps` updates instead of 200.
std::vector<std::string> flags_with_steps(const fs::path& text, const fs::path& out,
                                          const char* steps) {
  std::vector<std::string> a = run_flags(text, out);
  for (std::size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == "--steps") a[i + 1] = steps;
  return a;
}

TEST(TrainKill, KilledAtRandomMomentsAndResumedEqualsTheRunNeverStopped) {
  TempDir dir;
  spit(dir / "text.txt", test::repetitive_text());
  // The faster of two whole runs: one slowed by a busy moment would let every round below run
  // further than its share.
  double wall_ms = 0;
  for (const char* name : {"whole", "whole_again"}) {
    const Clock::time_point t0 = Clock::now();
    const test::Outcome whole = test::run(kExe, run_flags(dir / "text.txt", dir / name));
    ASSERT_EQ(whole.status, 0) << whole.err;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    wall_ms = wall_ms == 0 ? ms : std::min(wall_ms, ms);
  }

  // How long the program takes to start (loading, under a sanitizer its runtime too): a kill
  // before that proves nothing, and on a slow machine every kill could land there. The fastest
  // of three starts: a start measured long would let each round run further than its share.
  double start_ms = wall_ms;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point s0 = Clock::now();
    ASSERT_EQ(test::run(kExe, {"--help"}).status, 0);
    start_ms = std::min(start_ms, std::chrono::duration<double, std::milli>(Clock::now() - s0).count());
  }

  // Kills spread so that together they cover about half of the rest of the run (the last run
  // below finishes it): each invocation gets a random share of it after its start, most of which
  // lands in the middle of a save (the tiny model spends most of its time writing and fsyncing
  // files). Half, so that a start measured long on a busy machine does not let the run finish
  // before most kills.
  constexpr int kKills = 40;
  std::mt19937_64 rng(2026);
  const double share_ms = std::max(wall_ms - start_ms, 1.0) / kKills;
  std::uniform_real_distribution<double> delay_ms(start_ms, start_ms + share_ms);
  const fs::path out = dir / "killed";
  const std::vector<std::string> fresh = run_flags(dir / "text.txt", out);
  std::vector<std::string> resume = fresh;
  resume.insert(resume.end(), {"--resume", out.string()});
  int killed = 0, resumed = 0;
  bool finished = false;
  for (int round = 0; round < kKills && !finished; ++round) {
    // As a user would: resume when there is a checkpoint, else start again.
    const bool has_checkpoint = fs::exists(out / "train_state.safetensors");
    resumed += has_checkpoint;
    const std::string err = dir.file("err" + std::to_string(round));
    const pid_t pid = spawn(has_checkpoint ? resume : fresh, err);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms(rng)));
    ::kill(pid, SIGKILL);  // a zombie when it ended already: then nothing happens
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
      ASSERT_EQ(WTERMSIG(status), SIGKILL);
      ++killed;
      continue;
    }
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "round " << round << ": " << slurp(err);
    finished = true;
  }
  if (!finished) {
    const bool has_checkpoint = fs::exists(out / "train_state.safetensors");
    const test::Outcome last = test::run(kExe, has_checkpoint ? resume : fresh);
    ASSERT_EQ(last.status, 0) << last.err;
  }
  EXPECT_GE(killed, kKills / 2) << "most rounds should have been killed mid-run: " << killed
                                << " killed, " << resumed << " resumed, start " << start_ms
                                << " ms, whole run " << wall_ms << " ms";
  EXPECT_GE(resumed, kKills / 4);

  EXPECT_TRUE(slurp(dir / "whole/model.safetensors") == slurp(out / "model.safetensors"))
      << "the weights differ from the run never stopped";
  EXPECT_EQ(metrics_without_timing(dir / "whole"), metrics_without_timing(out));
  const SafeTensors a = read_safetensors(dir / "whole/train_state.safetensors");
  const SafeTensors b = read_safetensors(out / "train_state.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, t] = a.tensors[i];
    SCOPED_TRACE(name);
    ASSERT_EQ(b.tensors[i].first, name);
    if (name == "metrics") continue;  // its timing columns differ
    EXPECT_EQ(t.shape().str(), b.tensors[i].second.shape().str());
    EXPECT_TRUE(t.to_vector() == b.tensors[i].second.to_vector());
  }
  // What the kills left behind (temporary files of unfinished saves) is gone.
  EXPECT_EQ(test::files_in(out), (std::set<std::string>{"model.safetensors", "train_state.safetensors",
                                                        "metrics.csv", "loss.svg"}));
}

// A train state as tapegrad wrote it before it carried the weights and the metrics rows: they
// come from model.safetensors and metrics.csv, which must then be from the same update.
TEST(TrainKill, OlderTrainStateResumesFromTheFilesBesideIt) {
  TempDir dir;
  spit(dir / "text.txt", test::repetitive_text());
  // A constant rate, so that a run of 16 updates has the first 16 rates of a run of 30.
  auto flags = [&](const fs::path& out, const char* steps) {
    std::vector<std::string> a = flags_with_steps(dir / "text.txt", out, steps);
    a.insert(a.end(), {"--lr", "1e-2", "--lr-min", "1e-2", "--warmup", "0"});
    return a;
  };
  ASSERT_EQ(test::run(kExe, flags(dir / "whole", "30")).status, 0);
  ASSERT_EQ(test::run(kExe, flags(dir / "old", "16")).status, 0);
  const fs::path state_file = dir / "old/train_state.safetensors";
  SafeTensors st = read_safetensors(state_file);
  NamedTensors old_tensors;
  for (const auto& [name, t] : st.tensors)
    if (name.rfind("model.", 0) != 0 && name != "metrics") old_tensors.emplace_back(name, t);
  for (const char* key : {"tapegrad.config", "tapegrad.vocab", "tapegrad.arch"})
    st.metadata.erase(key);
  write_safetensors(state_file, old_tensors, st.metadata);

  const std::string before = slurp(dir / "old/model.safetensors");
  spit(dir / "old/model.safetensors", slurp(dir / "whole/model.safetensors"));  // update 30
  std::vector<std::string> resume = flags(dir / "old", "30");
  resume.insert(resume.end(), {"--resume", dir.file("old")});
  const test::Outcome mixed = test::run(kExe, resume);
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.err.find("is from update 30 but train_state.safetensors from 16"),
            std::string::npos) << mixed.err;

  spit(dir / "old/model.safetensors", before);
  const test::Outcome r = test::run(kExe, resume);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(slurp(dir / "whole/model.safetensors") == slurp(dir / "old/model.safetensors"));
  EXPECT_EQ(metrics_without_timing(dir / "whole"), metrics_without_timing(dir / "old"));
  // The next save wrote the train state of today, weights included.
  EXPECT_EQ(read_safetensors(state_file).metadata.count("tapegrad.config"), 1u);
}

// A kill after the last checkpoint's rename but before model.safetensors, metrics.csv and
// loss.svg were written again leaves them an update behind: resuming the finished run writes
// them from the checkpoint (the moment the random kills above seldom hit, made here on purpose).
TEST(TrainKill, ResumingAFinishedRunRepairsItsFiles) {
  TempDir dir;
  spit(dir / "text.txt", test::repetitive_text());
  auto flags = [&](const fs::path& out, const char* steps) {
    return flags_with_steps(dir / "text.txt", out, steps);
  };
  ASSERT_EQ(test::run(kExe, flags(dir / "whole", "20")).status, 0);
  ASSERT_EQ(test::run(kExe, flags(dir / "short", "18")).status, 0);
  fs::create_directories(dir / "killed");
  fs::copy_file(dir / "whole/train_state.safetensors", dir / "killed/train_state.safetensors");
  for (const char* f : {"model.safetensors", "metrics.csv", "loss.svg"})
    fs::copy_file(dir / "short" / f, dir / "killed" / f);
  std::vector<std::string> resume = flags(dir / "killed", "20");
  resume.insert(resume.end(), {"--resume", dir.file("killed")});
  const test::Outcome r = test::run(kExe, resume);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* f : {"model.safetensors", "metrics.csv"})
    EXPECT_TRUE(slurp(dir / "whole" / f) == slurp(dir / "killed" / f)) << f;
  // Fewer steps than the run has done is still a usage error.
  std::vector<std::string> fewer = flags(dir / "killed", "19");
  fewer.insert(fewer.end(), {"--resume", dir.file("killed")});
  const test::Outcome f = test::run(kExe, fewer);
  EXPECT_EQ(f.status, 2);
  EXPECT_NE(f.err.find("has done 20 updates already"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace tg
