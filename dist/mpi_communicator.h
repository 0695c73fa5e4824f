#pragma once
// MpiCommunicator: the ranks of MPI_COMM_WORLD. Built only when CMake found MPI; this header
// does not include <mpi.h>, so users of the communicator need no MPI include paths.
// Collectives split counts above INT_MAX into several calls (MPI counts are int). MPI's own
// errors stay fatal (MPI_ERRORS_ARE_FATAL, the default): a failed collective ends every rank.

#include <tapegrad/dist/communicator.h>

namespace tg::dist {

class MpiCommunicator final : public Communicator {
 public:
  /// MPI_Init_thread (FUNNELED: only the thread that made it calls MPI; OpenMP threads inside
  /// the ops never do). Throws ValueError when MPI was finalised already or another
  /// MpiCommunicator is alive; MPI_Init's own failures end the process (MPI's default).
  MpiCommunicator(int* argc, char*** argv);
  /// MPI_Finalize, when this object initialised MPI.
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }
  /// MPI_Barrier on MPI_COMM_WORLD. Throws nothing of its own.
  void barrier() override;
  /// Prints the line, then MPI_Abort(MPI_COMM_WORLD, status): every rank ends.
  [[noreturn]] void abort(const std::string& message, int status) override;

 protected:
  void do_allreduce_sum(double* data, int64_t count) override;
  void do_allreduce_sum(float* data, int64_t count) override;
  void do_broadcast(void* bytes, int64_t count, int root) override;
  // MPI_Iallreduce (in pieces of at most INT_MAX elements); the handle tests and waits them.
  std::unique_ptr<PendingCollective> do_start_allreduce_sum(double* data, int64_t count) override;
  std::unique_ptr<PendingCollective> do_start_allreduce_sum(float* data, int64_t count) override;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_ = false;  // this object called MPI_Init, so it calls MPI_Finalize
};

}  // namespace tg::dist
