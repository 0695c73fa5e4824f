#include "tools/train_data.h"

#include <cmath>
#include <string>

#include "autograd/grad_mode.h"
#include "data/induction.h"
#include "io/file_util.h"
#include "ops/cross_entropy.h"
#include "ops/reshape.h"

namespace tg {

namespace {

// Separate streams from one --seed: the evaluation batches must not depend on how many training
// batches were drawn before, nor shift the training stream.
constexpr uint64_t kEvalStream = 0x9E3779B97F4A7C15ull;

}  // namespace

TrainData::TrainData(Kind kind, int64_t B, int64_t T, uint64_t seed)
    : kind_(kind), B_(B), T_(T), seed_(seed), rng_(seed) {}

TrainData TrainData::text(const std::string& path, const std::optional<std::string>& vocab,
                          int64_t B, int64_t T, bool need_val, uint64_t seed) {
  const std::string text = detail::read_file(path);
  if (text.empty()) throw ValueError(path + ": the text is empty");
  TrainData d(Kind::text, B, T, seed);
  try {
    const data::CharTokenizer tok =
        vocab ? data::CharTokenizer::from_vocab(*vocab) : data::CharTokenizer::from_text(text);
    d.text_ = std::make_shared<data::TextData>(text, tok);
    d.vocab_ = tok.vocab();
    d.V_ = tok.size();
  } catch (const ValueError& e) {
    throw ValueError(path + ": " + e.what() + (vocab ? " of the resumed model" : ""));
  }
  // A text shorter than block + 1 has no window to train on; say so before any work is done.
  for (const data::Split s : {data::Split::train, data::Split::val}) {
    if (s == data::Split::val && !need_val) continue;
    const auto n = static_cast<int64_t>(d.text_->tokens(s).size());
    if (n < T + 1)
      throw ValueError(path + ": the " +
                       (s == data::Split::train ? "training split (first 90%" : "validation split (last 10%") +
                       " of " + std::to_string(text.size()) + " characters) has " +
                       std::to_string(n) + " characters, fewer than --block + 1 = " +
                       std::to_string(T + 1) + "; use a longer text or a smaller --block" +
                       (s == data::Split::val ? " (or --eval-every 0)" : ""));
  }
  return d;
}

TrainData TrainData::induction(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  if (V < (T + 2) / 2)
    throw ValueError("--task induction: --vocab " + std::to_string(V) +
                     " is too small for --block " + std::to_string(T) +
                     ": a period of up to ceil((T + 1) / 2) = " + std::to_string((T + 2) / 2) +
                     " distinct tokens needs that many");
  TrainData d(Kind::induction, B, T, seed);
  d.V_ = V;
  return d;
}

TrainData TrainData::batches(const std::string& path, int64_t V, int64_t block_size,
                             uint64_t seed) {
  auto fixed = std::make_shared<data::FixedBatches>(path, V);
  if (fixed->block_size() > block_size)
    throw ValueError(path + ": windows of T + 1 = " + std::to_string(fixed->block_size() + 1) +
                     " tokens need --block >= " + std::to_string(fixed->block_size()) +
                     ", got --block " + std::to_string(block_size));
  TrainData d(Kind::batches, fixed->batch_size(), fixed->block_size(), seed);
  d.V_ = V;
  d.fixed_ = std::move(fixed);
  return d;
}

const char* TrainData::kind_name() const {
  return kind_ == Kind::text ? "text" : kind_ == Kind::induction ? "induction" : "batches";
}

void TrainData::set_position(int64_t position) {
  if (position < 0) throw ValueError("data position " + std::to_string(position) + " < 0");
  position_ = position;
}

data::Batch TrainData::next() {
  data::Batch b;
  switch (kind_) {
    case Kind::text:
      b = text_->sample(data::Split::train, B_, T_, rng_);
      break;
    case Kind::induction: {
      data::InductionBatch ib = data::induction_batch(B_, T_, V_, rng_);
      b = {ib.x, ib.y};
      break;
    }
    case Kind::batches:
      b = fixed_->batch(position_);
      break;
  }
  ++position_;
  return b;
}

EvalResult finish_eval(const EvalSums& sums, int64_t n) {
  EvalResult r;
  r.val_loss = sums.loss / static_cast<double>(n);
  if (sums.predictable > 0) r.accuracy = sums.correct / sums.predictable;
  return r;
}

EvalResult TrainData::evaluate(nn::GPT& model, int64_t n) const {
  return finish_eval(evaluate_part(model, n, 0, 1), n);
}

EvalSums TrainData::evaluate_part(nn::GPT& model, int64_t n, int part, int parts) const {
  if (parts < 1 || part < 0 || part >= parts)
    throw ValueError("evaluate_part: part " + std::to_string(part) + " of " +
                     std::to_string(parts));
  NoGradGuard no_grad;
  model.eval();
  Rng rng(seed_ ^ kEvalStream);
  EvalSums sums;
  for (int64_t i = 0; i < n; ++i) {
    const bool mine = i % parts == part;
    if (kind_ == Kind::induction) {
      // The loss on all targets goes in val_loss (comparable with the training loss, which is
      // on all targets too); the accuracy is on the predictable targets only, the ones an
      // induction head can get right.
      const data::InductionBatch ib = data::induction_batch(B_, T_, V_, rng);
      if (!mine) continue;  // drawn all the same: the next batch must be the one-process one
      const Tensor logits = model(ib.x);  // (B, T, V)
      sums.loss += cross_entropy(reshape(logits, {-1, V_}), reshape(ib.y, {-1}), -1).item();
      const int64_t* p = ib.predictable.data<int64_t>();
      int64_t count = 0;
      for (int64_t k = 0; k < ib.predictable.numel(); ++k) count += p[k];
      if (count > 0) {
        sums.correct += data::induction_accuracy(logits, ib) * static_cast<double>(count);
        sums.predictable += static_cast<double>(count);
      }
      continue;
    }
    const data::Batch b = kind_ == Kind::text ? text_->sample(data::Split::val, B_, T_, rng)
                                              : fixed_->batch(i);
    if (mine) sums.loss += model.loss(b.x, b.y).item();
  }
  model.train();
  return sums;
}

}  // namespace tg
