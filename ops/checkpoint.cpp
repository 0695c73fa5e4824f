// checkpoint (see checkpoint.h). The forward runs fn with grad mode off, noting the tensors that
// require grad it reads (a ReadCollector): the node it makes has them as its edges, and the
// recomputation. The backward pass splices the recomputed graph in (autograd/backward_pass.cpp).
// Forward mode: inside a DualLevel, checkpoint is fn itself (no region node), so tangents flow
// through fn's ops and their rules record as in the plain run (reverse over forward, forward
// over reverse). The region's node could not carry them: a tangent made in fn's first run (grad
// mode off) would sit on no tape, so reverse over forward would miss its gradient.

#include <tapegrad/ops/checkpoint.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include <tapegrad/autograd/node.h>
#include <tapegrad/autograd/static_step.h>
#include <tapegrad/ops/narrow.h>
#include <tapegrad/ops/reshape.h>

namespace tg {
namespace {

// fn's outputs as the one tensor a node has: the output itself, or several end to end.
Tensor pack(const std::vector<Tensor>& outs, const std::string& who) {
  if (outs.empty()) throw ValueError(who + ": fn returned no tensor");
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined())
      throw ValueError(who + ": fn's output " + std::to_string(i) + " is an undefined tensor");
    if (outs[i].dtype() != outs[0].dtype())
      throw ValueError(who + ": fn's outputs are " + dtype_name(outs[0].dtype()) + " and " +
                       dtype_name(outs[i].dtype()) + "; several outputs must share a dtype");
  }
  if (outs.size() == 1) return outs[0];
  std::vector<Tensor> flat;
  for (const Tensor& o : outs) flat.push_back(reshape(o, {o.numel()}));
  return cat(flat, 0);
}

std::vector<uint64_t> versions(const std::vector<Tensor>& ts) {
  std::vector<uint64_t> v;
  for (const Tensor& t : ts) v.push_back(t.version());
  return v;
}

// Sets each Rng to the state it had at the forward; the destructor puts back the state it has now.
class RngReplay {
 public:
  RngReplay(const std::vector<Rng*>& rngs, const std::vector<Rng>& then) : rngs_(rngs) {
    for (std::size_t i = 0; i < rngs.size(); ++i) {
      now_.push_back(*rngs[i]);
      *rngs[i] = then[i];
    }
  }
  ~RngReplay() {
    for (std::size_t i = 0; i < now_.size(); ++i) *rngs_[i] = std::move(now_[i]);
  }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  const std::vector<Rng*>& rngs_;
  std::vector<Rng> now_;
};

void check_unchanged(const Tensor& t, uint64_t then, const std::string& who, const std::string& what) {
  if (t.version() == then) return;
  throw GraphError(who + ": " + what + ", of shape " + t.shape().str() +
                   ", was modified in place since the forward (version " + std::to_string(then) +
                   ", now " + std::to_string(t.version()) + "); recomputing fn from it would give "
                   "wrong gradients. Run backward before changing it, or change a clone");
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options, const std::source_location& where) {
  const std::string who = std::string("checkpoint (at ") + where.file_name() + ":" + std::to_string(where.line()) + ")";
  if (!fn) throw ValueError(who + ": fn is empty");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw ValueError(who + ": input " + std::to_string(i) + " is an undefined tensor");
  std::vector<Rng*> rngs;  // each once: a repeated one would be put back to its forward state
  for (Rng* r : options.rngs) {
    if (r == nullptr) throw ValueError(who + ": options.rngs holds a null Rng");
    if (std::find(rngs.begin(), rngs.end(), r) == rngs.end()) rngs.push_back(r);
  }
  if (!is_grad_enabled() || detail::forward_level() != 0) return fn(inputs);
  if (detail::current_step()) detail::throw_in_static_step("tg::checkpoint");

  const std::vector<uint64_t> input_versions = versions(inputs);
  std::vector<Rng> rngs_then;
  for (const Rng* r : rngs) rngs_then.push_back(*r);
  auto rc = std::make_unique<Recompute>();
  std::vector<Tensor> outs;
  Tensor y;
  {
    detail::ReadCollector reads(rc->edges);
    const NoGradGuard off;
    outs = fn(inputs);
    y = pack(outs, who);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].version() != input_versions[i])
      throw GraphError(who + ": fn wrote into its input " + std::to_string(i) + ", of shape " +
                       inputs[i].shape().str() + ", in place; a checkpointed fn must leave its "
                       "inputs as they are (the recomputation reads them again)");
  // Nothing fn read requires grad; or its one output is a tensor it did not make (an input).
  if (rc->edges.empty() || y.requires_grad()) return outs;

  std::vector<std::pair<Tensor, uint64_t>> read;  // the leaves fn read, with their versions
  for (const Edge& e : rc->edges)
    if (TensorImpl* l = e.leaf()) read.emplace_back(Tensor(e.leaf_ptr()), l->storage->version());
  const std::shared_ptr<Storage> value = y.impl().storage;
  const uint64_t value_version = value->version();
  const std::size_t bytes = static_cast<std::size_t>(y.numel()) * dtype_size(y.dtype());
  rc->run = [fn, inputs, input_versions, read = std::move(read), rngs,
             rngs_then = std::move(rngs_then), value, value_version, bytes, who]() -> Tensor {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      check_unchanged(inputs[i], input_versions[i], who, "its input " + std::to_string(i));
    for (const auto& [t, then] : read) check_unchanged(t, then, who, "a tensor fn read");
    Tensor y2;
    {
      const RngReplay replay(rngs, rngs_then);
      y2 = pack(fn(inputs), who);
    }
    const bool same = y2.numel() * dtype_size(y2.dtype()) == bytes &&
                      (value->version() != value_version || std::memcmp(y2.impl().storage->data(), value->data(), bytes) == 0);
    if (!same)
      throw GraphError(who + ": recomputing fn gave other values than its forward did; fn draws "
                       "from an Rng not in CheckpointOptions::rngs, was switched to eval or "
                       "training since, or is not deterministic");
    return y2;
  };
  std::vector<Shape> shapes;
  for (const Tensor& o : outs) shapes.push_back(o.shape());
  auto node = make_node();
  node->op = "checkpoint";
  node->where = where;
  node->output_shape = y.shape();
  node->output_dtype = y.dtype();
  node->extras().recompute = std::move(rc);
  detail::NodeCollector::note(node.get());  // an enclosing checkpoint's region holds this node
  Tensor out = detail::node_output(std::move(node), y.impl().storage);
  if (shapes.size() == 1) return {out};
  std::vector<Tensor> pieces;
  int64_t offset = 0;
  for (const Shape& s : shapes) {
    pieces.push_back(reshape(narrow(out, 0, offset, s.numel()), s.vec()));
    offset += s.numel();
  }
  return pieces;
}

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& inputs, const CheckpointOptions& options,
                  const std::source_location& where) {
  if (!fn) return checkpoint(CheckpointFn(), inputs, options, where)[0];  // throws: fn is empty
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; },
                    inputs, options, where)[0];
}

}  // namespace tg
