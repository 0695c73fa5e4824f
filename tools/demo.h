#pragma once
#include <ostream>

namespace tg {
/// `tapegrad demo`: the self-attention lesson, worked on its own T = 8, d_k = 4 example. Returns
/// the exit status: 0 when every check the lesson asks for passes, 1 otherwise.
int run_demo(std::ostream& out);

namespace demo {
/// The lesson's self-test (b) to (e) and the multi-head part; returns false on a failed check.
bool self_test(std::ostream& out);
}  // namespace demo
}  // namespace tg
