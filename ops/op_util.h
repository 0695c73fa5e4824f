#pragma once
// Shared by the op sources (not installed): Eigen views over tensor buffers and the checks every
// op starts with.

#include <Eigen/Core>
#include <string>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/tensor.h>

namespace tg::detail {

template <class T>
using MatRM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapMat = Eigen::Map<MatRM<T>>;
template <class T>
using CMapMat = Eigen::Map<const MatRM<T>>;
template <class T>
using MapArr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using CMapArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

inline void check_defined(const char* op, const Tensor& t, const char* name) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + name + " is an undefined tensor");
}

/// A defined float32 or float64 tensor; int64 (indices) is a ValueError naming the op.
inline void check_floating(const char* op, const Tensor& t) {
  check_defined(op, t, "input");
  if (!is_floating(t.dtype()))
    throw ValueError(std::string(op) + ": needs a float32 or float64 tensor, got " +
                     dtype_name(t.dtype()) + " of shape " + t.shape().str());
}

inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "first input");
  check_defined(op, b, "second input");
  if (a.dtype() != b.dtype())
    throw ValueError(std::string(op) + ": dtypes differ: " + a.shape().str() + " " +
                     dtype_name(a.dtype()) + " and " + b.shape().str() + " " +
                     dtype_name(b.dtype()));
}

inline void check_min_rank(const char* op, const Tensor& t, int rank) {
  check_defined(op, t, "input");
  if (t.rank() < rank)
    throw ShapeError(std::string(op) + ": needs rank " + std::to_string(rank) +
                     " or more, got shape " + t.shape().str());
}

}  // namespace tg::detail
