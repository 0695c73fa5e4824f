#pragma once
// What the suites that ask PyTorch itself share: running a script with /usr/bin/python3 and
// reading its answers back (blocks between "@@" lines, numbers, doubles written exactly).

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace tg::test {

// The stdout of `script` run by /usr/bin/python3 (the test fails on a nonzero exit).
inline std::string run_python(const std::string& script) {
  TempDir dir;
  spit(dir / "script.py", script);
  const std::string cmd = kPython + " " + dir.file("script.py") + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  const int status = pclose(pipe.release());
  EXPECT_EQ(status, 0) << out;
  return out;
}

// The blocks of `out` between lines "@@" (one per case).
inline std::vector<std::string> blocks(const std::string& out) {
  std::vector<std::string> b{""};
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line == "@@")
      b.emplace_back();
    else
      b.back() += (b.back().empty() ? "" : "\n") + line;
  }
  b.pop_back();  // after the last "@@"
  return b;
}

// The whitespace-separated numbers of `text`.
inline std::vector<double> numbers(const std::string& text) {
  std::vector<double> v;
  std::istringstream in(text);
  for (std::string w; in >> w;) v.push_back(std::strtod(w.c_str(), nullptr));
  return v;
}

// A double exactly, as Python's float.fromhex reads it.
inline std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace tg::test
