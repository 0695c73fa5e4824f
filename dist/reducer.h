#pragma once
// GradientReducer: average_gradients overlapped with the backward pass, as torch's
// DistributedDataParallel does it. The parameters are cut once into buckets of about
// `bucket_bytes`, in reverse order of registration (roughly the order in which backward finishes
// their gradients: the last layer first). While a pass is open, every parameter whose gradient the
// backward has completed is copied into its bucket (tg::GradReadyScope tells when); a bucket whose
// parameters are all in starts its allreduce at once, nonblocking, while backward goes on with
// the layers below. finish() starts what is left, waits, and writes the means into .grad().
//
//   tg::dist::GradientReducer reducer(model, *comm);  // once: the buckets and their buffers
//   for (step ...) {
//     model.zero_grad();
//     auto pass = reducer.begin();       // this thread's backward now feeds the buckets
//     loss_of(model, my_slice).backward();
//     pass.finish();                     // every .grad() is the mean over ranks
//     opt.step();
//   }
//
// The result is average_gradients's: each parameter's gradient summed over ranks (an allreduce),
// divided by the number of ranks; a rank without a gradient for a parameter contributes zeros; a
// parameter without a gradient on every rank keeps none. On two ranks the values are the same
// bit for bit (a + b is a + b); on more, MPI may add the ranks' parts in another order than in
// average_gradients's buckets (rounding, 1e-16). A gradient .grad() held before the pass
// (earlier micro-batches accumulated outside a pass) is included. The buckets are a second,
// permanent copy of the gradients' size.
//
// Collectives and errors. Every rank starts every bucket's allreduce exactly once per pass, in
// bucket order, whatever happens: a pass that ends without finish() (an exception in the
// forward, the backward or a callback on this rank) still starts the remaining buckets and waits
// for them, and changes no .grad() on this rank. So the ranks' collectives stay in step and the
// error can be agreed after the pass (run_agreed around the step). The other ranks' finish()
// then completes with sums that hold the failed rank's partial buckets: their .grad() is not a
// mean of anything, so a program that goes on after the agreed error zeroes the gradients
// first. One process (comm.size() == 1): a pass does nothing, as average_gradients.

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <tapegrad/autograd/grad_ready.h>
#include <tapegrad/autograd/tensor.h>
#include <tapegrad/dist/communicator.h>
#include <tapegrad/nn/module.h>

namespace tg::dist {

/// Bytes of gradient per bucket by default: small enough that the first buckets start early in a
/// small model's backward, large enough that each allreduce moves a useful amount.
inline constexpr int64_t kDefaultBucketBytes = int64_t{1} << 20;

class GradientReducer {
 public:
  class Pass;

  /// Cuts `params` into buckets and allocates their buffers. Not collective, but every rank must
  /// pass the same parameter list (shapes, dtypes, order) and bucket_bytes. Throws ValueError for
  /// an undefined or int64 parameter, one listed twice, or bucket_bytes < 1.
  GradientReducer(std::vector<Tensor> params, Communicator& comm,
                  int64_t bucket_bytes = kDefaultBucketBytes);
  /// GradientReducer(module.parameters(), comm, bucket_bytes).
  GradientReducer(nn::Module& module, Communicator& comm,
                  int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Opens a pass on this thread: the backward passes this thread runs until the pass ends feed
  /// the buckets. Throws ValueError when a pass is open already.
  Pass begin();

  /// How many buckets the parameters make.
  int64_t buckets() const;
  /// Of the last finished pass: how many buckets started their allreduce during the backward
  /// (before finish()). 0 for one process.
  int64_t overlapped() const { return overlapped_; }

 private:
  struct Slot;
  struct Bucket;
  void on_ready(const Tensor& leaf, const Tensor& grad);
  void fill(Slot& s, const Tensor* pass_grad);
  void start_ready_buckets();
  void progress();
  void finish_pass();
  void abandon_pass() noexcept;
  void reset_pass();

  Communicator& comm_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const TensorImpl*, int> index_;  // a parameter's slot
  bool open_ = false;
  int64_t next_ = 0;        // the next bucket to start
  int64_t overlapped_ = 0;  // in the last finished pass
};

/// An open pass (see GradientReducer). Move-only; end it on the thread that opened it.
class GradientReducer::Pass {
 public:
  /// Without finish(): starts and waits for the pass's remaining collectives (sums unused) and
  /// changes no .grad(), so that the ranks stay in step. Never throws; ends every rank with
  /// Communicator::abort if even that fails.
  ~Pass();
  Pass(Pass&& other) noexcept;
  Pass& operator=(Pass&&) = delete;
  Pass(const Pass&) = delete;

  /// Collective: starts the buckets not started yet (a parameter the backward did not reach
  /// contributes its .grad() as it is, or zeros), waits for every bucket, and writes each mean
  /// into .grad() (in place into a gradient buffer only this parameter sees, else through
  /// set_grad, as average_gradients). Ends the pass. Throws ValueError when called twice or when
  /// a .grad() has another shape or dtype than its parameter (the collectives are completed
  /// first, and no .grad() is changed).
  void finish();

 private:
  friend class GradientReducer;
  explicit Pass(GradientReducer* reducer);
  GradientReducer* reducer_;
  std::unique_ptr<GradReadyScope> scope_;
};

}  // namespace tg::dist
