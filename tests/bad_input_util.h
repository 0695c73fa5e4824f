#pragma once
// What the bad-input tables share: a row does one bad thing and names the error type it must
// raise and fragments its message must hold (the op and the shapes).

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/tensor.h>

namespace tg::test::bad_input {

using tg::Tensor;
constexpr tg::Dtype f32 = tg::Dtype::f32;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Kind { Shape, Value, Graph };

struct BadCase {
  const char* name;
  std::function<void()> run;
  Kind kind;
  std::vector<std::string> fragments;  // each must appear in what()
};

inline const char* kind_name(Kind k) {
  return k == Kind::Shape ? "ShapeError" : k == Kind::Value ? "ValueError" : "GraphError";
}

inline bool is_kind(const tg::Error& e, Kind k) {
  switch (k) {
    case Kind::Shape: return dynamic_cast<const tg::ShapeError*>(&e) != nullptr;
    case Kind::Value: return dynamic_cast<const tg::ValueError*>(&e) != nullptr;
    case Kind::Graph: return dynamic_cast<const tg::GraphError*>(&e) != nullptr;
  }
  return false;
}

// Zeros, and zeros that require grad.
inline Tensor z(const tg::Shape& s, tg::Dtype d = tg::Dtype::f64) { return tg::zeros(s, d); }
inline Tensor g(const tg::Shape& s) { return tg::zeros(s).set_requires_grad(); }

// Every row throws a tg::Error (a std::exception too) of its kind holding its fragments.
inline void expect_bad_cases(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      c.run();
      ADD_FAILURE() << "no exception; expected " << kind_name(c.kind);
    } catch (const tg::Error& e) {
      EXPECT_TRUE(is_kind(e, c.kind)) << "expected " << kind_name(c.kind) << ", got: " << e.what();
      EXPECT_TRUE(dynamic_cast<const std::exception*>(&e) != nullptr);
      const std::string m = e.what();
      for (const std::string& f : c.fragments)
        EXPECT_NE(m.find(f), std::string::npos) << "'" << f << "' not in: " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a tg::Error: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "not a std::exception";
    }
  }
}

}  // namespace tg::test::bad_input
