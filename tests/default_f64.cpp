// Linked into every suite but basics_test, init_test and print_test: those suites compute in
// double (gradchecks, 1e-12 comparisons with PyTorch and numpy), so they start with float64 as
// the default dtype, as a PyTorch test suite calls torch.set_default_dtype(torch.float64). The
// three keep the library's own default (float32) and test it.
//
// A static object of the first initialisation priority, so that tensors made at static
// initialisation and the parameters of parameterised tests see float64 too (a GoogleTest
// Environment's SetUp would run after both).

#include <tapegrad/autograd/tensor.h>

namespace {

struct DoubleByDefault {
  DoubleByDefault() { tg::set_default_dtype(tg::Dtype::f64); }
};

__attribute__((init_priority(101))) const DoubleByDefault kDoubleByDefault;

}  // namespace
