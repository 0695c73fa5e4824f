#pragma once
// Reading metrics.csv in the suites that run `tapegrad train`: a text's lines, a line's cells.

#include <sstream>
#include <string>
#include <vector>

namespace tg::test {

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The comma-separated cells of a line, an empty last one included.
inline std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string c;
  std::istringstream in(line);
  while (std::getline(in, c, ',')) out.push_back(c);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

}  // namespace tg::test
