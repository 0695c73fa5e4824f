#include "tools/train_data.h"

#include <cmath>
#include <string>
#include <utility>

#include <tapegrad/autograd/grad_mode.h>
#include <tapegrad/data/batches.h>
#include <tapegrad/data/image_batches.h>
#include <tapegrad/data/induction.h>
#include <tapegrad/data/text.h>
#include <tapegrad/io/file_util.h>

namespace tg {

namespace {

// Separate streams from one --seed: the evaluation batches must not depend on how many training
// batches were drawn before, nor shift the training stream.
constexpr uint64_t kEvalStream = 0x9E3779B97F4A7C15ull;

// The text encoded with the vocabulary `vocab` (a resumed model's) or its own, and that
// vocabulary.
std::pair<data::TextData, std::string> encode_text(const std::string& text,
                                                   const std::optional<std::string>& vocab,
                                                   const std::string& path) {
  try {
    const data::CharTokenizer tok =
        vocab ? data::CharTokenizer::from_vocab(*vocab) : data::CharTokenizer::from_text(text);
    return {data::TextData(text, tok), tok.vocab()};
  } catch (const ValueError& e) {
    throw ValueError(path + ": " + e.what() + (vocab ? " of the resumed model" : ""));
  }
}

// A text shorter than block + 1 has no window to train on; say so before any work is done.
void check_splits(const data::TextData& data, std::size_t chars, int64_t T, bool need_val,
                  const std::string& path) {
  for (const data::Split s : {data::Split::train, data::Split::val}) {
    if (s == data::Split::val && !need_val) continue;
    const auto n = static_cast<int64_t>(data.tokens(s).size());
    if (n < T + 1)
      throw ValueError(path + ": the " +
                       (s == data::Split::train ? "training split (first 90%" : "validation split (last 10%") +
                       " of " + std::to_string(chars) + " characters) has " +
                       std::to_string(n) + " characters, fewer than --block + 1 = " +
                       std::to_string(T + 1) + "; use a longer text or a smaller --block" +
                       (s == data::Split::val ? " (or --eval-every 0)" : ""));
  }
}

}  // namespace

TrainData::TrainData(Kind kind, std::unique_ptr<data::Source> source, int64_t T, uint64_t seed)
    : kind_(kind), source_(std::move(source)), T_(T), seed_(seed), rng_(seed) {}

TrainData TrainData::text(const std::string& path, const std::optional<std::string>& vocab,
                          int64_t B, int64_t T, bool need_val, uint64_t seed) {
  const std::string text = detail::read_file(path);
  if (text.empty()) throw ValueError(path + ": the text is empty");
  auto [data, text_vocab] = encode_text(text, vocab, path);
  check_splits(data, text.size(), T, need_val, path);
  TrainData d(Kind::text, std::make_unique<data::TextBatches>(std::move(data), B, T), T, seed);
  d.vocab_ = std::move(text_vocab);
  return d;
}

TrainData TrainData::induction(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  if (V < (T + 2) / 2)
    throw ValueError("--task induction: --vocab " + std::to_string(V) +
                     " is too small for --block " + std::to_string(T) +
                     ": a period of up to ceil((T + 1) / 2) = " + std::to_string((T + 2) / 2) +
                     " distinct tokens needs that many");
  return TrainData(Kind::induction, std::make_unique<data::InductionBatches>(B, T, V), T, seed);
}

TrainData TrainData::batches(const std::string& path, int64_t V, int64_t block_size,
                             uint64_t seed) {
  auto fixed = std::make_unique<data::FixedBatches>(path, V);
  if (fixed->block_size() > block_size)
    throw ValueError(path + ": windows of T + 1 = " + std::to_string(fixed->block_size() + 1) +
                     " tokens need --block >= " + std::to_string(fixed->block_size()) +
                     ", got --block " + std::to_string(block_size));
  const int64_t T = fixed->block_size();
  return TrainData(Kind::batches, std::move(fixed), T, seed);
}

TrainData TrainData::images(const std::string& dir, Dtype dtype, int64_t B, bool shuffle,
                            int64_t train_limit, uint64_t seed) {
  auto source = std::make_unique<data::ImageBatches>(data::read_image_folder(dir, dtype), B,
                                                     shuffle, train_limit, seed);
  return TrainData(Kind::images, std::move(source), /*T=*/1, seed);  // one label per row
}

int64_t TrainData::steps_per_epoch() const {
  const auto* images = dynamic_cast<const data::ImageBatches*>(source_.get());
  return images ? images->steps_per_epoch() : 0;
}

int64_t TrainData::eval_batches(int64_t asked) const {
  const auto* images = dynamic_cast<const data::ImageBatches*>(source_.get());
  return images ? images->eval_batches() : asked;
}

const char* TrainData::kind_name() const {
  switch (kind_) {
    case Kind::text: return "text";
    case Kind::induction: return "induction";
    case Kind::batches: return "batches";
    case Kind::images: return "images";
  }
  return "?";
}

void TrainData::set_position(int64_t position) {
  if (position < 0) throw ValueError("data position " + std::to_string(position) + " < 0");
  position_ = position;
}

data::Batch TrainData::next() {
  data::Batch b = source_->train_batch(position_, rng_);
  ++position_;
  return b;
}

EvalResult finish_eval(const EvalSums& sums, int64_t n) {
  EvalResult r;
  r.val_loss = sums.loss / static_cast<double>(n);
  if (sums.predictable > 0) r.accuracy = sums.correct / sums.predictable;
  return r;
}

EvalResult TrainData::evaluate(const Model& model, int64_t n) const {
  return finish_eval(evaluate_part(model, n, 0, 1), n);
}

// The loss is on all labels (comparable with the training loss, which is on all of them too);
// the accuracy on the scored ones only (the induction task's: those an induction head can get
// right).
EvalSums TrainData::score(const Model& model, const data::Batch& batch) {
  const Tensor logits = model.forward(batch.x);
  EvalSums sums;
  sums.loss = model.loss(logits, batch.y).item();
  const int64_t count = data::scored_count(batch);
  if (count > 0) {
    sums.correct = data::scored_accuracy(logits, batch) * static_cast<double>(count);
    sums.predictable = static_cast<double>(count);
  }
  return sums;
}

EvalSums TrainData::evaluate_part(const Model& model, int64_t n, int part, int parts) const {
  if (parts < 1 || part < 0 || part >= parts)
    throw ValueError("evaluate_part: part " + std::to_string(part) + " of " +
                     std::to_string(parts));
  NoGradGuard no_grad;
  model.module().eval();
  Rng rng(seed_ ^ kEvalStream);
  EvalSums sums;
  for (int64_t i = 0; i < n; ++i) {
    const data::Batch batch = source_->eval_batch(i, rng);
    if (i % parts != part) continue;  // drawn all the same: the next batch must be the one-process one
    const EvalSums s = score(model, batch);
    sums.loss += s.loss;
    sums.correct += s.correct;
    sums.predictable += s.predictable;
  }
  model.module().train();
  return sums;
}

}  // namespace tg
