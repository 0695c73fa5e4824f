#pragma once
// Printing helpers shared by the demo's two halves and `tapegrad check`.

#include <ostream>
#include <string>

#include <tapegrad/autograd/tensor.h>

namespace tg::demo {

void heading(std::ostream& out, const std::string& title);
/// "name  shape (8, 4)" then the values, indented.
void show(std::ostream& out, const std::string& name, const Tensor& t, int precision = 4,
          int64_t max_rows = 8);
/// " ok " or "FAIL" with the claim, and remembers a failure in `all_ok`.
void verdict(std::ostream& out, bool ok, const std::string& claim, bool& all_ok);
/// v in scientific notation with `digits` digits after the point: sci(0.000123, 1) = "1.2e-04".
std::string sci(double v, int digits);

}  // namespace tg::demo
