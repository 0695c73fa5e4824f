#pragma once
// What the data suites share: the ids of an int64 tensor, and tables of bad inputs (each row a
// label, the message of the error its call throws, and a fragment that message must hold).

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include "test_util.h"

namespace tg::test {

inline std::vector<int64_t> values(const Tensor& t) {
  const int64_t* p = t.data<int64_t>();
  return {p, p + t.numel()};
}

struct BadInput {
  const char* label;
  std::function<std::string()> message;  // message_of<ExpectedError>(...)
  std::string fragment;
};

inline void expect_rows(const std::vector<BadInput>& rows) {
  for (const BadInput& row : rows) {
    SCOPED_TRACE(row.label);
    const std::string msg = row.message();
    EXPECT_NE(msg.find(row.fragment), std::string::npos) << msg;
  }
}

template <class E>
std::function<std::string()> throws(std::function<void()> f) {
  return [f] { return message_of<E>(f); };
}

}  // namespace tg::test
