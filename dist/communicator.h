#pragma once
// Communicator: the processes of one data-parallel run (ranks 0 .. size - 1) and the collectives
// that training needs, after torch.distributed: allreduce (sum), broadcast, barrier. Every
// collective must be called by every rank, in the same order, with the same counts; a rank that
// skips one leaves the others waiting. Two implementations:
//   LocalCommunicator   one process (rank 0 of 1): every collective is the identity
//   MpiCommunicator     MPI_COMM_WORLD (dist/mpi_communicator.h), when built with MPI
// make_communicator() picks one for the way the program was launched.
//
// Errors across ranks. An exception on one rank must not leave the others blocked in a
// collective that rank never reaches, so errors stay local until a point where every rank checks
// in: agree_on_failure() (one small allreduce, then a broadcast of the message when something
// failed) makes every rank throw the same RankError, carrying the lowest failing rank's message
// and exit status. The program then ends on every rank the ordinary way (rank 0 prints the one
// line, every rank returns the status, MPI is finalized), so there is no MPI_Abort banner and no
// half-written file. A training loop calls it once per step (run_agreed() wraps a step).
// (Open MPI's mpirun adds its own notice about the nonzero exit; `mpirun -q` leaves just the line.)
// abort() is the last resort for an error in the middle of a sequence of collectives, where the
// other ranks can no longer be met: it prints one line and MPI_Abort()s every rank.

#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include <tapegrad/autograd/error.h>
#include <tapegrad/autograd/tensor.h>

namespace tg::dist {

/// A failure agreed by every rank (see agree_on_failure): the lowest failing rank, its message
/// and the exit status it asked for. what() is "rank R: MESSAGE".
class RankError : public std::runtime_error, public tg::Error {
 public:
  RankError(int rank, int status, const std::string& message);
  const char* what() const noexcept override { return std::runtime_error::what(); }
  int rank() const { return rank_; }
  int status() const { return status_; }
  /// The failing rank's own message (without the "rank R: " prefix).
  const std::string& message() const { return message_; }

 private:
  int rank_;
  int status_;
  std::string message_;
};

/// A collective in flight, from Communicator::start_allreduce_sum. Its buffer must stay alive and
/// untouched until it is done. Destroying one that is not done waits for it first (a collective
/// cannot be abandoned: the other ranks take part in it).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Whether it is done. Under MPI this also moves it on: MPI progresses a nonblocking
  /// collective only inside MPI calls, so a caller with other work tests now and then. Throws
  /// nothing.
  virtual bool test() = 0;
  /// Returns when it is done. Throws nothing.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "local".
  virtual const char* name() const = 0;

  /// Collective: every rank's data[0 .. count) replaced by the elementwise sum over ranks.
  /// Throws ValueError for a negative count or a null pointer with a positive count.
  void allreduce_sum(double* data, int64_t count);
  /// The same for float.
  void allreduce_sum(float* data, int64_t count);
  /// Collective, nonblocking: starts replacing every rank's data[0 .. count) by the elementwise
  /// sum over ranks and returns; the sum is there when the handle's wait() returns (or test()
  /// says true). Blocking and nonblocking collectives together must be started in the same order
  /// on every rank. Throws as allreduce_sum, before starting anything.
  std::unique_ptr<PendingCollective> start_allreduce_sum(double* data, int64_t count);
  /// The same for float.
  std::unique_ptr<PendingCollective> start_allreduce_sum(float* data, int64_t count);
  /// Collective, in place on a float or double tensor (the write bumps its version). Throws
  /// ValueError for an undefined or int64 tensor.
  void allreduce_sum(Tensor& t);
  /// allreduce_sum, then divided by size(). Throws as allreduce_sum(Tensor&).
  void allreduce_mean(Tensor& t);
  /// Collective: every rank's bytes[0 .. count) replaced by root's. Throws ValueError for a root
  /// outside [0, size()), a negative count, or a null pointer with a positive count.
  void broadcast_bytes(void* bytes, int64_t count, int root);
  /// Collective, in place: every rank's t takes root's values (any dtype; the write bumps t's
  /// version). The shapes must agree across ranks. Throws ValueError for an undefined tensor or a
  /// bad root.
  void broadcast(Tensor& t, int root = 0);
  /// Collective: returns when every rank has called it. Throws nothing of its own.
  virtual void barrier() = 0;
  /// Ends every rank now: prints "tapegrad: rank R of N: MESSAGE" to stderr and exits with
  /// `status` (MPI_Abort under MPI, which ends the other ranks too). Not collective: for errors
  /// inside a sequence of collectives; prefer agree_on_failure. Never returns.
  [[noreturn]] virtual void abort(const std::string& message, int status) = 0;

 protected:
  Communicator() = default;
  // The collectives proper; arguments already checked. Counts fit in int64; the MPI
  // implementation splits them into pieces that fit MPI's int counts.
  virtual void do_allreduce_sum(double* data, int64_t count) = 0;
  virtual void do_allreduce_sum(float* data, int64_t count) = 0;
  virtual void do_broadcast(void* bytes, int64_t count, int root) = 0;
  // Nonblocking allreduce. By default the blocking one, then a handle that is already done: a
  // communicator without nonblocking collectives works the same, only without overlap.
  virtual std::unique_ptr<PendingCollective> do_start_allreduce_sum(double* data, int64_t count);
  virtual std::unique_ptr<PendingCollective> do_start_allreduce_sum(float* data, int64_t count);

 private:
  void check_root(int root, const char* who) const;
};

/// One process: rank 0 of 1; allreduce and broadcast leave the data as it is.
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator() = default;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* name() const override { return "local"; }
  /// Does nothing (one rank is always in step with itself). Throws nothing.
  void barrier() override {}
  /// Prints the line and std::exit(status)s.
  [[noreturn]] void abort(const std::string& message, int status) override;

 protected:
  void do_allreduce_sum(double*, int64_t) override {}
  void do_allreduce_sum(float*, int64_t) override {}
  void do_broadcast(void*, int64_t, int) override {}
};

/// Whether this tapegrad was built with MPI (CMake found it and TAPEGRAD_MPI was ON). Never throws.
bool built_with_mpi();

/// Whether the environment says this process was started by an MPI launcher (mpirun / mpiexec
/// of Open MPI: OMPI_COMM_WORLD_SIZE; of MPICH, Intel MPI or Slurm's PMI: PMI_SIZE; PMIx:
/// PMIX_RANK). Never throws.
bool launched_by_mpi();

/// The communicator for this process: MPI's (MPI_Init on the first call; MPI_Finalize when the
/// returned object is destroyed) when built with MPI and launched_by_mpi(), else a
/// LocalCommunicator. A plain `./program` therefore never initialises MPI (no singleton start,
/// which is slow and fails in some containers). argc / argv are handed to MPI_Init (may be
/// null). Throws ValueError when MPI cannot be initialised (already finalised, or a second MPI
/// communicator while one is alive).
std::unique_ptr<Communicator> make_communicator(int* argc = nullptr, char*** argv = nullptr);

/// Collective, called by every rank at the same point with its own outcome (`error` null when
/// this rank succeeded): returns when no rank failed; otherwise throws RankError on every rank,
/// with the lowest failing rank's message and `status` (a RankError passed in keeps its own rank,
/// message and status). Costs one allreduce of size() doubles, plus broadcasts of the message on
/// failure. Throws only RankError.
void agree_on_failure(Communicator& comm, const std::exception_ptr& error, int status = 1);

/// Runs step() on this rank, catching what it throws, then agree_on_failure(comm, that, status):
/// every rank returns, or every rank throws the same RankError.
template <class F>
void run_agreed(Communicator& comm, F&& step, int status = 1) {
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_failure(comm, error, status);
}

}  // namespace tg::dist
