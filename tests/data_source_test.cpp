// data/: the sources behind one interface (data/source.h) draw exactly what their samplers draw,
// in the same order from the same generator (the training stream and the evaluation one), and a
// batch's scored labels give the argmax accuracy on those labels only.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/data/batches.h>
#include <tapegrad/data/induction.h>
#include <tapegrad/data/text.h>
#include "data_util.h"
#include <tapegrad/io/npy.h>
#include "test_util.h"

namespace tg::data {
namespace {

using test::expect_rows;
using test::TempDir;
using test::throws;
using test::values;

void expect_same(const Batch& got, const Batch& want) {
  EXPECT_EQ(values(got.x), values(want.x));
  EXPECT_EQ(values(got.y), values(want.y));
  EXPECT_EQ(got.scored.defined(), want.scored.defined());
  if (want.scored.defined()) {
    EXPECT_EQ(values(got.scored), values(want.scored));
  }
}

TEST(Source, TextBatchesAreTheSplitsSamples) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
  const TextData data(text, CharTokenizer::from_text(text));
  const TextBatches source(data, 3, 8);
  EXPECT_EQ(source.batch_size(), 3);
  Rng a(4), b(4);
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    expect_same(source.train_batch(step, a), data.sample(Split::train, 3, 8, b));
    expect_same(source.eval_batch(step, a), data.sample(Split::val, 3, 8, b));
  }
}

TEST(Source, InductionBatchesScoreThePredictableTargets) {
  const InductionBatches source(4, 9, 7);
  EXPECT_EQ(source.batch_size(), 4);
  Rng a(2), b(2);
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const InductionBatch want = induction_batch(4, 9, 7, b);
    expect_same(source.train_batch(step, a), {want.x, want.y, want.predictable});
  }
  const InductionBatch want = induction_batch(4, 9, 7, b);
  expect_same(source.eval_batch(0, a), {want.x, want.y, want.predictable});
}

TEST(Source, FixedBatchesIgnoreTheGenerator) {
  TempDir dir;
  std::vector<int64_t> tokens(2 * 3 * 5);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i % 11);
  write_npy(dir.file("b.npy"), from_indices(tokens, {2, 3, 5}));
  const FixedBatches source(dir.file("b.npy"), 11);
  Rng rng(0);
  const uint64_t before = rng.engine()();
  Rng fresh(0);
  for (int64_t step : {0, 1, 5}) {
    expect_same(source.train_batch(step, fresh), source.batch(step));
    expect_same(source.eval_batch(step, fresh), source.batch(step));
  }
  EXPECT_EQ(fresh.engine()(), before);  // nothing drawn
}

TEST(Batch, ScoredAccuracyCountsTheScoredLabelsOnly) {
  // Labels (2, 2); logits (2, 2, 3) voting for 0, 2, 1, 1; the labels are 0, 1, 1, 2.
  const Tensor logits = from_vector({5, 1, 1, 0, 0, 3, 0, 4, 0, 0, 2, 1}, {2, 2, 3});
  Batch batch{Tensor(), from_indices({0, 1, 1, 2}, {2, 2})};
  EXPECT_EQ(scored_count(batch), 0);
  EXPECT_TRUE(std::isnan(scored_accuracy(logits, batch)));  // no accuracy where none is scored
  batch.scored = from_indices({1, 1, 1, 1}, {2, 2});
  EXPECT_EQ(scored_count(batch), 4);
  EXPECT_EQ(scored_accuracy(logits, batch), 0.5);
  batch.scored = from_indices({1, 0, 1, 0}, {2, 2});
  EXPECT_EQ(scored_count(batch), 2);
  EXPECT_EQ(scored_accuracy(logits, batch), 1.0);
  batch.scored = from_indices({0, 0, 0, 0}, {2, 2});
  EXPECT_TRUE(std::isnan(scored_accuracy(logits, batch)));
  // Images' shape: logits (B, C) against labels (B).
  const Batch classes{Tensor(), from_indices({2, 0}, {2}), from_indices({1, 1}, {2})};
  EXPECT_EQ(scored_accuracy(from_vector({0, 1, 3, 2, 1, 0}, {2, 3}), classes), 1.0);
  expect_rows({
      {"logits without classes",
       throws<ShapeError>([&] { scored_accuracy(from_vector({1, 2, 3, 4}, {2, 2}), batch); }),
       "scored_accuracy: logits (2, 2) do not fit labels (2, 2)"},
      {"another row count",
       throws<ShapeError>([&] { scored_accuracy(zeros({3, 2, 3}), batch); }),
       "logits (3, 2, 3) do not fit labels (2, 2)"},
  });
}

}  // namespace
}  // namespace tg::data
