#include <tapegrad/dist/mpi_communicator.h>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <vector>

namespace tg::dist {

namespace {

// MPI can be initialised once per process, and COMM_WORLD is one: two live communicators would
// finalise it twice.
std::atomic<bool> g_alive{false};

// MPI counts are int: a longer buffer goes in pieces of at most INT_MAX elements.
template <class F>
void in_pieces(int64_t count, F&& piece) {
  for (int64_t done = 0; done < count;) {
    const int n = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    piece(done, n);
    done += n;
  }
}

// Nonblocking allreduces in flight: MPI's requests, one per piece.
class MpiPending final : public PendingCollective {
 public:
  ~MpiPending() override { wait(); }
  bool test() override {
    if (requests_.empty()) return true;
    int done = 0;
    MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE);
    if (done) requests_.clear();
    return done != 0;
  }
  void wait() override {
    if (requests_.empty()) return;
    MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
  }
  std::vector<MPI_Request> requests_;
};

template <class T>
std::unique_ptr<PendingCollective> start_sum(T* data, int64_t count, MPI_Datatype type) {
  auto pending = std::make_unique<MpiPending>();
  in_pieces(count, [&](int64_t at, int n) {
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, data + at, n, type, MPI_SUM, MPI_COMM_WORLD, &r);
    pending->requests_.push_back(r);
  });
  return pending;
}

}  // namespace

MpiCommunicator::MpiCommunicator(int* argc, char*** argv) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) throw ValueError("MpiCommunicator: MPI was finalized already in this process");
  if (g_alive.exchange(true))
    throw ValueError("MpiCommunicator: another MPI communicator is alive in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (owns_mpi_) MPI_Finalize();
  g_alive = false;
}

void MpiCommunicator::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void MpiCommunicator::abort(const std::string& message, int status) {
  std::cerr << "tapegrad: rank " << rank_ << " of " << size_ << ": " << message << std::endl;
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
}

void MpiCommunicator::do_allreduce_sum(double* data, int64_t count) {
  in_pieces(count, [&](int64_t at, int n) {
    MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  });
}

void MpiCommunicator::do_allreduce_sum(float* data, int64_t count) {
  in_pieces(count, [&](int64_t at, int n) {
    MPI_Allreduce(MPI_IN_PLACE, data + at, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
}

void MpiCommunicator::do_broadcast(void* bytes, int64_t count, int root) {
  auto* b = static_cast<char*>(bytes);
  in_pieces(count, [&](int64_t at, int n) { MPI_Bcast(b + at, n, MPI_BYTE, root, MPI_COMM_WORLD); });
}

std::unique_ptr<PendingCollective> MpiCommunicator::do_start_allreduce_sum(double* data,
                                                                           int64_t count) {
  return start_sum(data, count, MPI_DOUBLE);
}

std::unique_ptr<PendingCollective> MpiCommunicator::do_start_allreduce_sum(float* data,
                                                                           int64_t count) {
  return start_sum(data, count, MPI_FLOAT);
}

}  // namespace tg::dist
