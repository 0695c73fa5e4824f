#include <tapegrad/dist/data_parallel.h>

#include <algorithm>
#include <string>
#include <utility>

namespace tg::dist {

namespace {

std::string describe(const Tensor& t) { return t.shape().str() + " " + dtype_name(t.dtype()); }

void check_param(const Tensor& p, size_t index, const char* who) {
  if (!p.defined())
    throw ValueError(std::string(who) + ": parameter " + std::to_string(index) + " is undefined");
  if (!is_floating(p.dtype()))
    throw ValueError(std::string(who) + ": parameter " + std::to_string(index) + " is " +
                     describe(p) + ", not a float tensor");
}

// One parameter's part in the averaging: where its gradient is read from (undefined: this rank
// has none, it contributes zeros) and where the mean is written.
struct Slot {
  Tensor param;
  Tensor source;
  Tensor target;
  bool install = false;  // target is a new tensor, handed to the parameter by set_grad
};

Slot make_slot(const Tensor& p, size_t index) {
  Slot s;
  s.param = p;
  auto& g = p.impl().grad;
  if (g && (g->shape != p.shape() || g->dtype != p.dtype()))
    throw ValueError("average_gradients: parameter " + std::to_string(index) + " is " +
                     describe(p) + " but its gradient is " + describe(Tensor(g)));
  // backward's own rule for writing into .grad() in place: nobody else holds the handle or the
  // buffer, and it is not a recorded gradient.
  const bool own = g && !g->grad_fn && g.use_count() == 1 && g->storage.use_count() == 1;
  if (own) {
    s.source = s.target = Tensor(g);
  } else {
    if (g) s.source = Tensor(g);
    s.target = Tensor(p.shape(), p.dtype());
    s.install = true;
  }
  return s;
}

// Packs the slots' gradients (all of dtype T) into buckets, allreduces each, divides by the
// number of ranks and writes the means to the targets.
template <class T>
void average_slots(const std::vector<Slot*>& slots, Communicator& comm) {
  struct Piece {
    T* target;
    int64_t count;
  };
  int64_t total = 0;
  for (const Slot* s : slots) total += s->param.numel();
  std::vector<T> bucket;
  bucket.reserve(static_cast<size_t>(std::min(total, kBucketElements)));
  std::vector<Piece> pieces;
  const T ranks = static_cast<T>(comm.size());

  const auto flush = [&] {
    comm.allreduce_sum(bucket.data(), static_cast<int64_t>(bucket.size()));
    const T* mean = bucket.data();
    for (const Piece& piece : pieces) {
      for (int64_t i = 0; i < piece.count; ++i) piece.target[i] = mean[i] / ranks;
      mean += piece.count;
    }
    bucket.clear();
    pieces.clear();
  };

  for (Slot* s : slots) {
    const T* source = s->source.defined() ? std::as_const(s->source).template data<T>() : nullptr;
    T* target = s->target.template data<T>();  // a non-const handle: the target's version moves on
    const int64_t n = s->param.numel();
    for (int64_t at = 0; at < n;) {
      const int64_t room = kBucketElements - static_cast<int64_t>(bucket.size());
      const int64_t take = std::min(n - at, room);
      if (source)
        bucket.insert(bucket.end(), source + at, source + at + take);
      else
        bucket.resize(bucket.size() + static_cast<size_t>(take), T(0));
      pieces.push_back({target + at, take});
      at += take;
      if (static_cast<int64_t>(bucket.size()) == kBucketElements) flush();
    }
  }
  if (!bucket.empty()) flush();
}

}  // namespace

void average_gradients(const std::vector<Tensor>& params, Communicator& comm) {
  for (size_t i = 0; i < params.size(); ++i) check_param(params[i], i, "average_gradients");
  if (comm.size() == 1) return;  // the mean over one rank is its own gradient

  // First which parameters have a gradient on some rank: only those take part, and a rank
  // without one contributes zeros.
  std::vector<double> holders(params.size(), 0.0);
  for (size_t i = 0; i < params.size(); ++i) holders[i] = params[i].grad().defined() ? 1.0 : 0.0;
  comm.allreduce_sum(holders.data(), static_cast<int64_t>(holders.size()));

  std::vector<Slot> slots;
  slots.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    if (holders[i] > 0) slots.push_back(make_slot(params[i], i));
  // One pass per dtype, float64 first, every rank in the same order.
  for (const Dtype dtype : {Dtype::f64, Dtype::f32}) {
    std::vector<Slot*> of_dtype;
    for (Slot& s : slots)
      if (s.param.dtype() == dtype) of_dtype.push_back(&s);
    if (of_dtype.empty()) continue;
    dispatch(dtype, [&]<class T>() { average_slots<T>(of_dtype, comm); });
  }
  for (const Slot& s : slots)
    if (s.install) s.param.set_grad(s.target);
}

void average_gradients(nn::Module& module, Communicator& comm) {
  average_gradients(module.parameters(), comm);
}

namespace {

// The layout of a parameter list as numbers: the count, then per parameter its dtype, rank and
// sizes.
std::vector<int64_t> layout_of(const std::vector<Tensor>& params) {
  std::vector<int64_t> out = {static_cast<int64_t>(params.size())};
  for (const Tensor& p : params) {
    out.push_back(static_cast<int64_t>(p.dtype()));
    out.push_back(p.rank());
    for (int a = 0; a < p.rank(); ++a) out.push_back(p.size(a));
  }
  return out;
}

// The first difference between root's layout and this rank's, in words; "" when they agree.
std::string layout_mismatch(const std::vector<int64_t>& root, const std::vector<Tensor>& params,
                            int root_rank) {
  if (root[0] != static_cast<int64_t>(params.size()))
    return "broadcast_parameters: this rank has " + std::to_string(params.size()) +
           " parameters, rank " + std::to_string(root_rank) + " has " + std::to_string(root[0]);
  size_t at = 1;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    // Root's entry: dtype, rank, sizes.
    const auto dtype = static_cast<Dtype>(root[at]);
    const int rank = static_cast<int>(root[at + 1]);
    std::vector<int64_t> sizes(root.begin() + static_cast<std::ptrdiff_t>(at + 2),
                               root.begin() + static_cast<std::ptrdiff_t>(at + 2 + rank));
    const Shape shape(sizes);
    if (dtype != p.dtype() || shape != p.shape())
      return "broadcast_parameters: parameter " + std::to_string(i) + " is " + describe(p) +
             " here, " + shape.str() + " " + dtype_name(dtype) + " on rank " +
             std::to_string(root_rank);
    at += 2 + static_cast<size_t>(rank);
  }
  return "";
}

}  // namespace

void broadcast_parameters(const std::vector<Tensor>& params, Communicator& comm, int root) {
  if (root < 0 || root >= comm.size())
    throw ValueError("broadcast_parameters: root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(comm.size()));
  for (size_t i = 0; i < params.size(); ++i) check_param(params[i], i, "broadcast_parameters");
  if (comm.size() == 1) return;

  // Root's layout reaches everyone first: a mismatched replica would otherwise turn into an MPI
  // error (or silently wrong values) in the middle of the broadcasts.
  std::vector<int64_t> layout = layout_of(params);
  int64_t length = static_cast<int64_t>(layout.size());
  comm.broadcast_bytes(&length, sizeof length, root);
  std::vector<int64_t> root_layout = layout;
  root_layout.resize(static_cast<size_t>(length));
  comm.broadcast_bytes(root_layout.data(), length * static_cast<int64_t>(sizeof(int64_t)), root);
  run_agreed(comm, [&] {
    if (const std::string what = layout_mismatch(root_layout, params, root); !what.empty())
      throw ValueError(what);
  });

  for (Tensor p : params) comm.broadcast(p, root);
}

void broadcast_parameters(nn::Module& module, Communicator& comm, int root) {
  broadcast_parameters(module.parameters(), comm, root);
}

}  // namespace tg::dist
