#include <tapegrad/dist/reducer.h>

#include <algorithm>
#include <string>
#include <utility>

namespace tg::dist {

namespace {

std::string shape_and_dtype(const Tensor& t) { return t.shape().str() + " " + dtype_name(t.dtype()); }

}  // namespace

// A parameter's place: elements [offset, offset + numel) of its bucket, and the element `holder`
// that counts the ranks holding a gradient for it.
struct GradientReducer::Slot {
  Tensor param;
  int index = 0;  // in the parameter list, for messages
  int bucket = 0;
  int64_t offset = 0;
  int64_t holder = 0;
  bool in = false;  // copied into the bucket in this pass
};

// Parameters of one dtype: their gradients, then one holder count per parameter.
struct GradientReducer::Bucket {
  Tensor data;  // 1-D
  std::vector<int> slots;
  int waiting = 0;  // slots not in yet in this pass
  std::unique_ptr<PendingCollective> inflight;
};

GradientReducer::GradientReducer(std::vector<Tensor> params, Communicator& comm,
                                 int64_t bucket_bytes)
    : comm_(comm) {
  if (bucket_bytes < 1)
    throw ValueError("GradientReducer: bucket_bytes must be at least 1, got " +
                     std::to_string(bucket_bytes));
  slots_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const std::string which = "GradientReducer: parameter " + std::to_string(i);
    if (!p.defined()) throw ValueError(which + " is undefined");
    if (!is_floating(p.dtype()))
      throw ValueError(which + " is " + shape_and_dtype(p) + ", not a float tensor");
    if (!index_.emplace(p.impl_ptr().get(), static_cast<int>(i)).second)
      throw ValueError(which + " (" + shape_and_dtype(p) + ") is listed twice");
    slots_[i].param = p;
    slots_[i].index = static_cast<int>(i);
  }
  // Buckets in reverse order of the list: backward finishes the last layers first.
  std::vector<std::vector<int>> groups;
  std::vector<Dtype> dtypes;
  int64_t bytes = 0;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    const Tensor& p = params[static_cast<size_t>(i)];
    const int64_t b = p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
    if (groups.empty() || dtypes.back() != p.dtype() || (bytes > 0 && bytes + b > bucket_bytes)) {
      groups.emplace_back();
      dtypes.push_back(p.dtype());
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += b;
  }
  buckets_.resize(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    Bucket& bucket = buckets_[k];
    bucket.slots = groups[k];
    int64_t at = 0;
    for (int i : bucket.slots) {
      slots_[static_cast<size_t>(i)].bucket = static_cast<int>(k);
      slots_[static_cast<size_t>(i)].offset = at;
      at += params[static_cast<size_t>(i)].numel();
    }
    for (int i : bucket.slots) slots_[static_cast<size_t>(i)].holder = at++;
    bucket.data = zeros({at}, dtypes[k]);  // touched once here, reused by every pass
    bucket.waiting = static_cast<int>(bucket.slots.size());
  }
}

GradientReducer::GradientReducer(nn::Module& module, Communicator& comm, int64_t bucket_bytes)
    : GradientReducer(module.parameters(), comm, bucket_bytes) {}

GradientReducer::~GradientReducer() = default;

int64_t GradientReducer::buckets() const { return static_cast<int64_t>(buckets_.size()); }

GradientReducer::Pass GradientReducer::begin() {
  if (open_) throw ValueError("GradientReducer: begin() while a pass is open; finish it first");
  Pass pass(this);  // may throw (its scope is allocated): then no pass is open
  open_ = true;
  return pass;
}

GradientReducer::Pass::Pass(GradientReducer* reducer) : reducer_(reducer) {
  if (reducer_->comm_.size() > 1)
    scope_ = std::make_unique<GradReadyScope>(
        [r = reducer_](const Tensor& leaf, const Tensor& grad) { r->on_ready(leaf, grad); });
}

GradientReducer::Pass::Pass(Pass&& other) noexcept
    : reducer_(std::exchange(other.reducer_, nullptr)), scope_(std::move(other.scope_)) {}

GradientReducer::Pass::~Pass() {
  if (!reducer_) return;
  scope_.reset();
  reducer_->abandon_pass();
}

void GradientReducer::Pass::finish() {
  if (!reducer_) throw ValueError("GradientReducer: finish() of a pass that has ended");
  scope_.reset();  // no more callbacks: what backward did not reach is taken as it is
  GradientReducer* r = std::exchange(reducer_, nullptr);
  try {
    r->finish_pass();
  } catch (...) {
    r->abandon_pass();
    throw;
  }
}

// A parameter's gradient for this pass is complete: into its bucket; start what is ready.
void GradientReducer::on_ready(const Tensor& leaf, const Tensor& grad) {
  const auto it = index_.find(leaf.impl_ptr().get());
  if (it == index_.end()) return;  // a leaf that is not one of the parameters
  Slot& s = slots_[static_cast<size_t>(it->second)];
  if (s.in)
    throw ValueError("GradientReducer: parameter " + std::to_string(s.index) + " (" +
                     shape_and_dtype(s.param) + ") got a gradient from a second backward in one pass; " +
                     "run one backward per pass (accumulate earlier micro-batches before begin())");
  fill(s, &grad);
  if (--buckets_[static_cast<size_t>(s.bucket)].waiting == 0) start_ready_buckets();
  progress();
}

// Copies the parameter's gradient (what .grad() holds plus this pass's, either may be missing)
// into its bucket, and whether this rank has one.
void GradientReducer::fill(Slot& s, const Tensor* pass_grad) {
  const Tensor held = s.param.grad();
  if (held.defined() && (held.shape() != s.param.shape() || held.dtype() != s.param.dtype()))
    throw ValueError("GradientReducer: parameter " + std::to_string(s.index) + " is " +
                     shape_and_dtype(s.param) + " but its gradient is " + shape_and_dtype(held));
  Bucket& bucket = buckets_[static_cast<size_t>(s.bucket)];
  dispatch(s.param.dtype(), [&]<class T>() {
    T* out = bucket.data.data<T>() + s.offset;
    const int64_t n = s.param.numel();
    const T* a = held.defined() ? std::as_const(held).data<T>() : nullptr;
    const T* b = pass_grad ? std::as_const(*pass_grad).data<T>() : nullptr;
    if (a && b)
      for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    else if (a || b)
      std::copy(a ? a : b, (a ? a : b) + n, out);
    else
      std::fill(out, out + n, T(0));
    bucket.data.data<T>()[s.holder] = (a || b) ? T(1) : T(0);
  });
  s.in = true;
}

// Buckets start in order on every rank: the next one as soon as all its parameters are in.
void GradientReducer::start_ready_buckets() {
  while (next_ < buckets() && buckets_[static_cast<size_t>(next_)].waiting == 0) {
    Bucket& bucket = buckets_[static_cast<size_t>(next_)];
    dispatch(bucket.data.dtype(), [&]<class T>() {
      bucket.inflight = comm_.start_allreduce_sum(bucket.data.data<T>(), bucket.data.numel());
    });
    ++next_;  // only once it started: an abandoned pass retries one that did not
  }
}

// MPI moves a nonblocking collective on only inside MPI calls: a test now and then does it.
void GradientReducer::progress() {
  for (int64_t k = 0; k < next_; ++k)
    if (auto& inflight = buckets_[static_cast<size_t>(k)].inflight; inflight && !inflight->test())
      return;
}

void GradientReducer::finish_pass() {
  if (comm_.size() == 1) {
    reset_pass();
    return;
  }
  int64_t early = next_;
  for (Slot& s : slots_)
    if (!s.in) {
      fill(s, nullptr);
      --buckets_[static_cast<size_t>(s.bucket)].waiting;
    }
  start_ready_buckets();
  for (Bucket& bucket : buckets_) bucket.inflight->wait();
  // Every bucket holds the sums now: the means go to .grad().
  for (Slot& s : slots_) {
    const Bucket& bucket = buckets_[static_cast<size_t>(s.bucket)];
    dispatch(s.param.dtype(), [&]<class T>() {
      const T* sum = std::as_const(bucket.data).data<T>();
      if (sum[s.holder] == T(0)) return;  // no rank has a gradient: it keeps none
      auto& g = s.param.impl().grad;
      // backward's rule for writing into .grad() in place: nobody else holds the handle or the
      // buffer, and it is not a recorded gradient.
      const bool own = g && !g->grad_fn && g.use_count() == 1 && g->storage.use_count() == 1;
      Tensor target = own ? Tensor(g) : Tensor(s.param.shape(), s.param.dtype());
      T* out = target.data<T>();
      const T ranks = static_cast<T>(comm_.size());
      // Divide (not multiply by 1 / size), as average_gradients and a one-process mean round.
      for (int64_t i = 0, n = s.param.numel(); i < n; ++i) out[i] = sum[s.offset + i] / ranks;
      if (!own) s.param.set_grad(target);
    });
  }
  reset_pass();
  overlapped_ = early;
}

// The pass ends without its results: every bucket still starts (with whatever it holds; a
// parameter not in yet counts as zeros) and completes, so every rank made the same collectives.
void GradientReducer::abandon_pass() noexcept {
  try {
    if (comm_.size() > 1) {
      for (Slot& s : slots_)
        if (!s.in) {
          s.in = true;
          --buckets_[static_cast<size_t>(s.bucket)].waiting;
        }
      start_ready_buckets();
      for (Bucket& bucket : buckets_)
        if (bucket.inflight) bucket.inflight->wait();
    }
    reset_pass();
  } catch (const std::exception& e) {
    comm_.abort(std::string("GradientReducer: cannot complete a pass's collectives: ") + e.what(),
                1);
  }
}

void GradientReducer::reset_pass() {
  for (Slot& s : slots_) s.in = false;
  for (Bucket& bucket : buckets_) {
    bucket.inflight.reset();
    bucket.waiting = static_cast<int>(bucket.slots.size());
  }
  next_ = 0;
  open_ = false;
}

}  // namespace tg::dist
