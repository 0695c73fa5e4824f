#pragma once
// The examples' command-line numbers: a bad one is a one-line error (tg::ValueError), not a crash.

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <tapegrad/tapegrad.h>

/// The whole number `text`, at least `lo`. Throws ValueError naming the argument otherwise.
inline int64_t count_arg(const char* text, const char* name, int64_t lo) {
  int64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc() || stop != end || value < lo)
    throw tg::ValueError(std::string(name) + " must be a whole number >= " + std::to_string(lo) +
                         ", not '" + text + "'");
  return value;
}
