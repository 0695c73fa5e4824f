#pragma once
// The list of ops: one row per op, read by everything that needs every op (the registry test
// checks each has cases, the PyTorch agreement test runs each, the random-graph test composes
// them, the benchmarks time them, `tapegrad check` reports them). Adding an op means: its file
// pair, a row here, its registry rows, its PyTorch form in tests/op_list_reference.py.

#include <functional>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

/// How an op's inputs relate to its output, so generic tests can compose it with any shapes.
enum class OpKind {
  unary,   // elementwise, one input, output of the input's shape
  binary,  // elementwise, two inputs broadcast numpy style
  other,   // shapes of its own (the generic drivers use `sample_shapes`)
};

/// Which inputs an op accepts.
enum class OpDomain {
  real,      // any finite value
  positive,  // log, sqrt, rsqrt, div's divisor: inputs are mapped to positive values first
  nonzero,   // a kink at 0 (relu): inputs are kept away from it for finite differences
};

struct OpInfo {
  const char* name;  // as recorded on the tape and in the registry: "softmax"
  OpKind kind;
  OpDomain domain;
  std::vector<Shape> sample_shapes;  // the inputs' shapes at the list's sizes (see below)
  /// The op on float inputs: of any shapes for unary and binary ops, of sample_shapes otherwise
  /// (index inputs, masks and options are fixed inside).
  std::function<Tensor(const std::vector<Tensor>&)> call;
  /// Null for an op the PyTorch agreement test (tests/op_list_torch_test.cpp) compares with
  /// PyTorch; for an op without a PyTorch counterpart to compare with, what checks it instead.
  const char* reference = nullptr;
};

/// A draw x (of N(0, 1), say) taken into the op's domain: x^2 + 1/2 for a positive op, x itself
/// otherwise (what a nonzero op needs, the caller keeps away from 0).
Tensor in_domain(const OpInfo& op, const Tensor& x);

/// Every op, in alphabetical order, at the benchmarks' sizes.
const std::vector<OpInfo>& op_list();

/// The same rows at small sizes of the same form (a few entries per axis), for the tests that
/// run every op.
const std::vector<OpInfo>& op_list_small();

}  // namespace tg
