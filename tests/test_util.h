#pragma once
// What the test suites share: a temporary folder per use, whole-file reads and writes, the
// message of an expected exception, a scoped default dtype, bytewise tensor equality, the
// python3 check, and whether AddressSanitizer is on.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <source_location>
#include <string>
#include <vector>

#include <tapegrad/autograd/sanitizers.h>  // TG_ASAN
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/threads.h>

namespace tg::test {

namespace fs = std::filesystem;

/// The thread count set for a scope, and the count and its adaptation to a busy machine put
/// back after it. Adaptation is off meanwhile, so that a team of two runs even where the other
/// core is busy (a test comparing thread counts must get the count it asked for).
class ThreadCount {
 public:
  explicit ThreadCount(int n = num_threads()) : saved_(num_threads()), adapt_(thread_adaptation()) {
    set_thread_adaptation(false);
    set_num_threads(n);
  }
  ~ThreadCount() {
    set_num_threads(saved_);
    set_thread_adaptation(adapt_);
  }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
  bool adapt_;
};

/// A fresh folder under the system temp folder, removed with its contents afterwards.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;  // a process may hold several at once; each test is its own process
    path_ = fs::temp_directory_path() /
            ("tapegrad_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// The names of what the folder holds now, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

/// The whole file ("" when it cannot be read).
inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `bytes` as the whole file.
inline void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// The resident set of this process now, bytes.
inline std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Sets the default dtype for a scope, then restores the one before (most suites start with
/// float64: default_f64.cpp).
class DefaultDtypeScope {
 public:
  explicit DefaultDtypeScope(Dtype dtype) : before_(get_default_dtype()) {
    set_default_dtype(dtype);
  }
  ~DefaultDtypeScope() { set_default_dtype(before_); }
  DefaultDtypeScope(const DefaultDtypeScope&) = delete;
  DefaultDtypeScope& operator=(const DefaultDtypeScope&) = delete;

 private:
  Dtype before_;
};

/// Same shape, dtype and bytes (NaNs and -0.0 included).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.impl().storage->data(), b.impl().storage->data(),
                     a.numel() * dtype_size(a.dtype())) == 0;
}

/// v with 3 significant digits, for RecordProperty.
inline std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// The message of the E that f throws, or a marker that no E came (other exceptions pass).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception of the expected type)";
}

/// Expects f to throw an E whose message holds every fragment; failures name the caller's line.
template <class E, class F>
void expect_throws(F&& f, const std::vector<std::string>& fragments,
                   std::source_location at = std::source_location::current()) {
  try {
    f();
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& fragment : fragments)
      if (what.find(fragment) == std::string::npos)
        ADD_FAILURE_AT(at.file_name(), at.line()) << "'" << fragment << "' not in: " << what;
    return;
  }
  ADD_FAILURE_AT(at.file_name(), at.line()) << "no exception of the expected type";
}

inline const std::string kPython = "/usr/bin/python3";

/// "" when kPython has `modules` ("numpy, torch"), else a line saying that it lacks one. Found,
/// not imported: importing torch takes seconds, and ctest runs every test in a process of its own
/// (a module that is found but fails to import fails the test's own script).
inline std::string python_missing(const std::string& modules) {
  static std::map<std::string, std::string> known;  // probed once per process and set
  const auto [it, fresh] = known.try_emplace(modules);
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on a chain of +.
  std::string probe = kPython;
  probe += " -c 'import importlib.util as u, sys; ";
  probe += "sys.exit(any(u.find_spec(m.strip()) is None for m in sys.argv[1].split(\",\")))' '";
  probe += modules;
  probe += "' >/dev/null 2>&1";
  if (fresh && std::system(probe.c_str()) != 0) {
    it->second = kPython;
    it->second += " lacks one of ";
    it->second += modules;
  }
  return it->second;
}

}  // namespace tg::test

// Skips the test when python3 lacks `modules`, and fails it when the environment variable CI is
// set (CI must run it). A macro because GTEST_SKIP and FAIL return from the test itself.
#define TG_REQUIRE_PYTHON(modules)                                                   \
  do {                                                                               \
    const std::string tg_missing_ = ::tg::test::python_missing(modules);             \
    if (!tg_missing_.empty()) {                                                      \
      if (std::getenv("CI")) FAIL() << tg_missing_ << " (CI is set, so this fails)"; \
      GTEST_SKIP() << tg_missing_;                                                   \
    }                                                                                \
  } while (0)
