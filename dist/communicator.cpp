#include <tapegrad/dist/communicator.h>

#include <cstdlib>
#include <iostream>
#include <vector>

#ifdef TAPEGRAD_HAVE_MPI
#include <tapegrad/dist/mpi_communicator.h>
#endif

namespace tg::dist {

RankError::RankError(int rank, int status, const std::string& message)
    : std::runtime_error("rank " + std::to_string(rank) + ": " + message),
      rank_(rank),
      status_(status),
      message_(message) {}

namespace {

void check_span(const void* data, int64_t count, const char* who) {
  if (count < 0) throw ValueError(std::string(who) + ": negative count " + std::to_string(count));
  if (count > 0 && data == nullptr)
    throw ValueError(std::string(who) + ": null data for " + std::to_string(count) + " elements");
}

void check_tensor(const Tensor& t, const char* who, bool floating_only) {
  if (!t.defined()) throw ValueError(std::string(who) + ": the tensor is undefined");
  if (floating_only && !is_floating(t.dtype()))
    throw ValueError(std::string(who) + ": needs a float32 or float64 tensor, got " +
                     dtype_name(t.dtype()));
}

}  // namespace

void Communicator::check_root(int root, const char* who) const {
  if (root < 0 || root >= size())
    throw ValueError(std::string(who) + ": root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(size()));
}

void Communicator::allreduce_sum(double* data, int64_t count) {
  check_span(data, count, "allreduce_sum");
  do_allreduce_sum(data, count);
}

void Communicator::allreduce_sum(float* data, int64_t count) {
  check_span(data, count, "allreduce_sum");
  do_allreduce_sum(data, count);
}

namespace {

// What a blocking collective leaves: a collective that is already done.
class Done final : public PendingCollective {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<PendingCollective> Communicator::start_allreduce_sum(double* data, int64_t count) {
  check_span(data, count, "start_allreduce_sum");
  return do_start_allreduce_sum(data, count);
}

std::unique_ptr<PendingCollective> Communicator::start_allreduce_sum(float* data, int64_t count) {
  check_span(data, count, "start_allreduce_sum");
  return do_start_allreduce_sum(data, count);
}

std::unique_ptr<PendingCollective> Communicator::do_start_allreduce_sum(double* data,
                                                                        int64_t count) {
  do_allreduce_sum(data, count);
  return std::make_unique<Done>();
}

std::unique_ptr<PendingCollective> Communicator::do_start_allreduce_sum(float* data,
                                                                        int64_t count) {
  do_allreduce_sum(data, count);
  return std::make_unique<Done>();
}

void Communicator::allreduce_sum(Tensor& t) {
  check_tensor(t, "allreduce_sum", true);
  dispatch(t.dtype(), [&]<class T>() { allreduce_sum(t.data<T>(), t.numel()); });
}

void Communicator::allreduce_mean(Tensor& t) {
  check_tensor(t, "allreduce_mean", true);
  dispatch(t.dtype(), [&]<class T>() {
    T* x = t.data<T>();
    const int64_t n = t.numel();
    allreduce_sum(x, n);
    // Divide (not multiply by 1/size) so that a mean over ranks rounds as a one-process mean.
    const T ranks = static_cast<T>(size());
    for (int64_t i = 0; i < n; ++i) x[i] /= ranks;
  });
}

void Communicator::broadcast_bytes(void* bytes, int64_t count, int root) {
  check_span(bytes, count, "broadcast");
  check_root(root, "broadcast");
  do_broadcast(bytes, count, root);
}

void Communicator::broadcast(Tensor& t, int root) {
  check_tensor(t, "broadcast", false);
  check_root(root, "broadcast");
  auto& storage = *t.impl().storage;
  storage.bump_version();  // every rank, root too: the call is a write as far as a graph knows
  do_broadcast(storage.data(), t.numel() * static_cast<int64_t>(dtype_size(t.dtype())), root);
}

void LocalCommunicator::abort(const std::string& message, int status) {
  std::cerr << "tapegrad: rank 0 of 1: " << message << std::endl;
  std::exit(status);
}

bool built_with_mpi() {
#ifdef TAPEGRAD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(int* argc, char*** argv) {
#ifdef TAPEGRAD_HAVE_MPI
  if (launched_by_mpi()) return std::make_unique<MpiCommunicator>(argc, argv);
#else
  (void)argc;
  (void)argv;
  // N processes that each believed they were alone would each write the same files.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* n = std::getenv(var);
    if (n != nullptr && std::atoi(n) > 1)
      throw ValueError(std::string("make_communicator: started by an MPI launcher with ") + n +
                       " ranks, but this tapegrad was built without MPI (install libopenmpi-dev "
                       "and rebuild with -DTAPEGRAD_MPI=ON)");
  }
#endif
  return std::make_unique<LocalCommunicator>();
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

namespace {

// What this rank contributes to agree_on_failure: whether it failed, its status and message.
struct Outcome {
  bool failed = false;
  int rank = 0;
  int status = 1;
  std::string message;
};

Outcome outcome_of(const std::exception_ptr& error, int rank, int status) {
  Outcome o;
  o.rank = rank;
  if (!error) return o;
  o.failed = true;
  o.status = status;
  try {
    std::rethrow_exception(error);
  } catch (const RankError& e) {  // already agreed inside the step: keep the original author
    o.rank = e.rank();
    o.status = e.status();
    o.message = e.message();
  } catch (const std::exception& e) {
    o.message = e.what();
  } catch (...) {
    o.message = "unknown exception";
  }
  return o;
}

}  // namespace

void agree_on_failure(Communicator& comm, const std::exception_ptr& error, int status) {
  const int n = comm.size();
  const Outcome mine = outcome_of(error, comm.rank(), status);
  // Slot r holds rank r's status when it failed (a status is never 0 here), 0 otherwise: after
  // the sum every rank knows who failed, and the lowest such rank speaks for all.
  std::vector<double> statuses(static_cast<size_t>(n), 0.0);
  if (mine.failed) statuses[static_cast<size_t>(comm.rank())] = mine.status == 0 ? 1 : mine.status;
  comm.allreduce_sum(statuses.data(), n);
  int speaker = -1;
  for (int r = 0; r < n && speaker < 0; ++r)
    if (statuses[static_cast<size_t>(r)] != 0) speaker = r;
  if (speaker < 0) return;

  // The speaker's message (and, for a RankError it re-raises, the original rank) reaches all.
  std::vector<int64_t> header = {mine.rank, static_cast<int64_t>(mine.message.size())};
  comm.broadcast_bytes(header.data(), static_cast<int64_t>(header.size() * sizeof(int64_t)),
                       speaker);
  std::string message = mine.message;
  message.resize(static_cast<size_t>(header[1]));
  comm.broadcast_bytes(message.data(), header[1], speaker);
  throw RankError(static_cast<int>(header[0]),
                  static_cast<int>(statuses[static_cast<size_t>(speaker)]), message);
}

}  // namespace tg::dist
