// A data-parallel loop in which rank 1 fails at step 2, run under mpirun by ctest through
// tests/dist_error_check.cmake. `agree`: the ranks agree on the failure at the end of the step,
// rank 0 prints one line and every rank returns 1 (MPI finalised cleanly). `abort`: rank 1 gives
// up alone with Communicator::abort, which ends every rank with status 3.

#include <iostream>
#include <string>

#include <tapegrad/dist/communicator.h>

int main(int argc, char** argv) {
  auto comm = tg::dist::make_communicator(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "agree";
  try {
    for (int step = 0; step < 5; ++step) {
      tg::dist::run_agreed(*comm, [&] {
        if (comm->rank() == 1 && step == 2) {
          if (mode == "abort") comm->abort("step 2: deliberate failure", 3);
          throw tg::ValueError("step 2: deliberate failure");
        }
      });
      double one = 1;
      comm->allreduce_sum(&one, 1);  // the step's collective work
    }
  } catch (const tg::dist::RankError& e) {
    if (comm->rank() == 0) std::cerr << "dist_error: " << e.what() << "\n";
    return e.status();
  }
  return 0;
}
