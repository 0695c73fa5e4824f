#pragma once
// tapegrad's error types. Every user error is a tg::Error, and also a standard exception:
// bad arguments derive from std::invalid_argument, bad state from std::runtime_error, so
// `catch (const std::exception&)` and `catch (const tg::Error&)` both work.

#include <new>
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

/// Memory the OS refused: names what asked (a tensor's shape and bytes, the tape, a backward).
/// It is a std::bad_alloc too, and it allocates nothing: the message is formatted into a buffer
/// of its own, so it can be made and thrown when memory is gone.
class MemoryError : public std::bad_alloc, public Error {
 public:
  /// printf-style.
  [[gnu::format(printf, 2, 3)]] explicit MemoryError(const char* format, ...) noexcept;
  const char* what() const noexcept override { return message_; }

 private:
  char message_[256];
};

}  // namespace tg
