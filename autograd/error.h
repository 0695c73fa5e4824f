#pragma once
// tapegrad's error types. Every user error is a tg::Error, and also a standard exception:
// bad arguments derive from std::invalid_argument, bad state from std::runtime_error, so
// `catch (const std::exception&)` and `catch (const tg::Error&)` both work.

#include <stdexcept>
#include <string>

namespace tg {

/// Marker base of every tapegrad error; what() names the op (or file) and the shapes.
class Error {
 public:
  virtual ~Error() = default;
  virtual const char* what() const noexcept = 0;
};

/// Shapes that do not fit the op: mismatch, wrong rank, bad axis.
class ShapeError : public std::invalid_argument, public Error {
 public:
  explicit ShapeError(const std::string& m) : std::invalid_argument(m) {}
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

/// A bad value: a dtype mismatch, a non-finite number where none is allowed, a bad option.
class ValueError : public std::invalid_argument, public Error {
 public:
  explicit ValueError(const std::string& m) : std::invalid_argument(m) {}
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

/// Misuse of the tape: backward through a freed graph, backward on a non-scalar without a
/// grad_output, a tensor that does not require grad.
class GraphError : public std::runtime_error, public Error {
 public:
  explicit GraphError(const std::string& m) : std::runtime_error(m) {}
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

/// A file that cannot be read or written, or whose contents are malformed.
class IoError : public std::runtime_error, public Error {
 public:
  explicit IoError(const std::string& m) : std::runtime_error(m) {}
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

/// Memory the OS refused: names the shape, dtype and bytes asked for.
class MemoryError : public std::runtime_error, public Error {
 public:
  explicit MemoryError(const std::string& m) : std::runtime_error(m) {}
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

}  // namespace tg
