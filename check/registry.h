#pragma once
// The op-case registry, after PyTorch's OpInfo: one table of sample inputs per op. It drives the
// parameterized gradcheck + gradgradcheck test and the `tapegrad check` command; adding an op
// means adding rows here.

#include <string>
#include <vector>

#include <tapegrad/check/gradcheck.h>
#include <tapegrad/autograd/tensor.h>

namespace tg {

struct OpCase {
  std::string op;    // the op under test: "softmax"
  std::string name;  // the case: "softmax/masked_row"
  std::vector<Tensor> inputs;  // float64, fixed seed
  Function fn;                 // inputs -> outputs; every output element gets its Jacobian row
  GradcheckOptions options;    // the case's own tolerances
  bool second_order = true;    // also run gradgradcheck

  /// "(3, 4), (4, 2)": the input shapes, for tables and failure messages.
  std::string shapes() const;
};

/// Every registered op case, built afresh (inputs from fixed seeds).
std::vector<OpCase> op_cases();

}  // namespace tg
