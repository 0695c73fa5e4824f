// A program whose whole life is spent under a tight address-space cap (ctest runs it under
// `ulimit -v`): a chain of tanh ops on its first thread's first graph runs out of memory. It
// must get a tg::MemoryError and go on (twice, then a small backward), never abort: the C
// runtime registers a thread's engine state for destruction on first use, which allocates, and
// a refused registration aborts ("failed to register TLS destructor") when that first use is
// the destructor a MemoryError runs.

#include <cstdio>

#include <tapegrad/tapegrad.h>

int main() {
  tg::Tensor x = tg::from_vector({0.5}, {1}, tg::Dtype::f64).set_requires_grad();
  int errors = 0;
  for (int round = 0; round < 2; ++round) {
    try {
      tg::Tensor y = x;
      for (long i = 0; i < 50000000; ++i) y = tg::tanh(y);
      std::printf("memory never ran out\n");
      return 3;
    } catch (const tg::MemoryError& e) {
      ++errors;
    }
  }
  tg::sum(tg::tanh(x)).backward();
  std::printf("survived %d MemoryErrors, grad %g\n", errors, x.grad().item());
  return errors == 2 ? 0 : 4;
}
