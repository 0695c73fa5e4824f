// data/: uniform integers, the char tokenizer, the 90/10 split and random windows, and the
// induction task, each checked against the definitions in data/'s headers. Fixed batches from .npy
// files are in data_batches_test.cpp.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <tapegrad/data/induction.h>
#include <tapegrad/data/text.h>
#include <tapegrad/data/tokenizer.h>
#include <tapegrad/data/uniform.h>
#include "data_util.h"

namespace tg::data {
namespace {

using test::expect_rows;
using test::throws;
using test::values;

// ---- uniform integers -----------------------------------------------------------------------

TEST(Uniform, SameNumbersOnEveryPlatform) {
  // mt19937_64's first output for seed 5489 is fixed by the C++ standard:
  // 14514284786278117030, below the rejection limit for these n, so the result is it mod n.
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {10, 0}, {1000, 30}, {7, 14514284786278117030u % 7}, {1, 0}};
  for (const auto& [n, expected] : cases) {
    Rng rng(5489);
    EXPECT_EQ(uniform_below(rng, n), expected) << n;
  }
  Rng rng(1);
  EXPECT_THROW(uniform_below(rng, 0), ValueError);
}

TEST(Uniform, RejectsTheBiasedTail) {
  // n about 2/3 of 2^64: plain r mod n would put 2/3 of the results in [0, n / 2); rejection
  // sampling keeps it at 1/2.
  const uint64_t n = 12297829382473034411u;
  Rng rng(3);
  int low = 0;
  for (int i = 0; i < 4000; ++i) {
    const uint64_t r = uniform_below(rng, n);
    ASSERT_LT(r, n);
    low += r < n / 2;
  }
  EXPECT_NEAR(low, 2000, 150);
}

// ---- tokenizer ------------------------------------------------------------------------------

TEST(CharTokenizer, VocabularyIsTheSortedSetOfCharacters) {
  const CharTokenizer tok = CharTokenizer::from_text("hello world\nbye");
  EXPECT_EQ(tok.vocab(), "\n bdehlorwy");
  EXPECT_EQ(tok.size(), 11);
  EXPECT_EQ(tok.encode("hello"), (std::vector<int64_t>{5, 4, 6, 6, 7}));
  // Characters are code points, in code point order: 'z' (U+007A), 'é' (U+00E9), 'ł' (U+0142).
  const CharTokenizer utf8 = CharTokenizer::from_text("\xc5\x82\xc3\xa9z\xc3\xa9");
  EXPECT_EQ(utf8.vocab(), "z\xc3\xa9\xc5\x82");
  EXPECT_EQ(utf8.size(), 3);
  EXPECT_EQ(utf8.encode("\xc5\x82\xc3\xa9z"), (std::vector<int64_t>{2, 1, 0}));
}

TEST(CharTokenizer, RoundTripsAndRestoresFromItsVocabulary) {
  const std::string text = "First Citizen:\nBefore we proceed any further, hear me.\n\xc3\xa9\x01";
  const CharTokenizer tok = CharTokenizer::from_text(text);
  const std::vector<int64_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size() - 1);  // 'é' is one character of two bytes
  for (std::size_t i = 0; i + 3 < ids.size(); ++i) EXPECT_EQ(tok.vocab()[ids[i]], text[i]) << i;
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(CharTokenizer::from_vocab(tok.vocab()).encode(text), ids);
  // A saved vocabulary keeps its own order.
  EXPECT_EQ(CharTokenizer::from_vocab("ba").encode("ab"), (std::vector<int64_t>{1, 0}));
}

TEST(CharTokenizer, RejectsBadInput) {
  const CharTokenizer tok = CharTokenizer::from_text("abc ");
  expect_rows({
      {"unknown char", throws<ValueError>([&] { tok.encode("ab z"); }),
       "CharTokenizer::encode: character 'z' at byte 3 is not in the vocabulary (4 "
       "characters)"},
      {"newline", throws<ValueError>([&] { tok.encode("a\n"); }), "character '\\n' at byte 1"},
      {"nul byte", throws<ValueError>([&] { tok.encode(std::string("\0", 1)); }),
       "character '\\x00' at byte 0"},
      {"utf-8 char", throws<ValueError>([&] { tok.encode("ab\xc3\xa9"); }),
       "character '\xc3\xa9' (U+00E9) at byte 2"},
      {"not utf-8", throws<ValueError>([&] { tok.encode("ab\xa9"); }),
       "the text is not valid UTF-8 at byte 2 ('\\xa9')"},
      {"not utf-8 text", throws<ValueError>([] { CharTokenizer::from_text("a\xc3"); }),
       "not valid UTF-8 at byte 1"},
      {"quote", throws<ValueError>([&] { tok.encode("'"); }), "character '\\'' at byte 0"},
      {"id too large", throws<ValueError>([&] { tok.decode({0, 4}); }),
       "CharTokenizer::decode: id 4 at index 1 is outside the vocabulary [0, 4)"},
      {"negative id", throws<ValueError>([&] { tok.decode({-1}); }), "id -1 at index 0"},
      {"empty text", throws<ValueError>([] { CharTokenizer::from_text(""); }), "text is empty"},
      {"empty vocab", throws<ValueError>([] { CharTokenizer::from_vocab(""); }),
       "the vocabulary is empty"},
      {"repeated vocab", throws<ValueError>([] { CharTokenizer::from_vocab("abca"); }),
       "repeats the character 'a' (ids 0 and 3)"},
  });
}

// ---- text: split and random windows ---------------------------------------------------------

TEST(TextData, SplitsNinetyTen) {
  // int(n * 0.9) as Python computes it; 1115394 is tinyshakespeare (nanoGPT: 1,003,854 train).
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {1, 0},   {2, 1},   {3, 2},    {9, 8},    {10, 9},          {11, 9},
      {19, 17}, {29, 26}, {30, 27}, {101, 90}, {1115394, 1003854}};
  for (const auto& [n, n_train] : cases) {
    SCOPED_TRACE(n);
    std::string text(n, 'a');
    for (int64_t i = 0; i < n; ++i) text[i] = static_cast<char>('a' + i % 26);
    const CharTokenizer tok = CharTokenizer::from_text(text);
    const TextData data(text, tok);
    EXPECT_EQ(static_cast<int64_t>(data.tokens(Split::train).size()), n_train);
    std::vector<int64_t> both = data.tokens(Split::train);
    both.insert(both.end(), data.tokens(Split::val).begin(), data.tokens(Split::val).end());
    EXPECT_EQ(both, tok.encode(text));
  }
}

// 95 distinct printable characters in sorted order: token i sits at position i, so a window's
// first token is its offset. Train holds tokens 0..84, val 85..94.
std::string ascii_text() {
  std::string text;
  for (char c = ' '; c <= '~'; ++c) text += c;
  return text;
}

TEST(TextData, WindowsAreShiftedByOneAndEveryOffsetIsReachable) {
  const std::string text = ascii_text();
  const TextData data(text, CharTokenizer::from_text(text));
  constexpr int64_t B = 16, T = 4;
  for (const auto& [split, first, len] :
       {std::tuple{Split::train, 0, 85}, std::tuple{Split::val, 85, 10}}) {
    SCOPED_TRACE(split_name(split));
    Rng rng(42);
    std::set<int64_t> offsets;
    for (int draw = 0; draw < 100; ++draw) {
      const Batch batch = data.sample(split, B, T, rng);
      ASSERT_EQ(batch.x.shape(), Shape({B, T}));
      ASSERT_EQ(batch.y.shape(), Shape({B, T}));
      ASSERT_EQ(batch.y.dtype(), Dtype::i64);
      const std::vector<int64_t> x = values(batch.x), y = values(batch.y);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t offset = x[b * T] - first;
        ASSERT_GE(offset, 0);
        ASSERT_LE(offset, len - T - 1);
        offsets.insert(offset);
        for (int64_t t = 0; t < T; ++t) {
          EXPECT_EQ(x[b * T + t], first + offset + t);
          EXPECT_EQ(y[b * T + t], first + offset + t + 1);
        }
      }
    }
    EXPECT_EQ(static_cast<int64_t>(offsets.size()), len - T);  // all of [0, len - T - 1]
  }
}

TEST(TextData, SameSeedSameBatchOtherSeedOther) {
  const std::string text = ascii_text();
  const TextData data(text, CharTokenizer::from_text(text));
  Rng a(7), b(7), c(8);
  const Batch ba = data.sample(Split::train, 8, 16, a);
  const Batch bb = data.sample(Split::train, 8, 16, b);
  EXPECT_EQ(values(ba.x), values(bb.x));
  EXPECT_EQ(values(ba.y), values(bb.y));
  EXPECT_NE(values(ba.x), values(data.sample(Split::train, 8, 16, c).x));
  EXPECT_NE(values(ba.x), values(data.sample(Split::train, 8, 16, a).x));  // the stream moves on
}

TEST(TextData, RejectsSplitsShorterThanAWindow) {
  const std::string text = ascii_text().substr(0, 20);  // train 18 tokens, val 2
  const TextData data(text, CharTokenizer::from_text(text));
  Rng rng(0);
  const auto sample = [&](Split s, int64_t B, int64_t T) {
    return throws<ValueError>([&, s, B, T] { data.sample(s, B, T, rng); });
  };
  expect_rows({
      {"val too short", sample(Split::val, 1, 2),
       "TextData::sample: the val split has 2 tokens, fewer than block size T + 1 = 3 (T = 2)"},
      {"train too short", sample(Split::train, 4, 18), "the train split has 18 tokens"},
      {"zero batch", sample(Split::train, 0, 4), "batch size 0 and block size 4"},
      {"zero block", sample(Split::train, 1, 0), "must both be at least 1"},
      {"char outside", throws<ValueError>([] { TextData("abz", CharTokenizer::from_text("ab")); }),
       "character 'z' at byte 2"},
  });
  EXPECT_NO_THROW(data.sample(Split::val, 1, 1, rng));
  EXPECT_NO_THROW(data.sample(Split::train, 1, 17, rng));
}

// ---- the induction task ---------------------------------------------------------------------

// The period of a sequence: the first position whose token appeared before (s[P] = s[0]).
int64_t first_repeat(const std::vector<int64_t>& s) {
  std::set<int64_t> seen;
  for (std::size_t t = 0; t < s.size(); ++t)
    if (!seen.insert(s[t]).second) return static_cast<int64_t>(t);
  return -1;
}

TEST(Induction, SequencesFollowTheDefinition) {
  for (const auto& [T, V] : std::vector<std::pair<int64_t, int64_t>>{{15, 8}, {16, 20}, {1, 1}}) {
    SCOPED_TRACE("T " + std::to_string(T) + ", V " + std::to_string(V));
    const int64_t lo = (T + 1 + 3) / 4, hi = (T + 1 + 1) / 2;
    constexpr int64_t B = 2000;
    Rng rng(11);
    const InductionBatch batch = induction_batch(B, T, V, rng);
    for (const Tensor& t : {batch.x, batch.y, batch.predictable}) {
      ASSERT_EQ(t.shape(), Shape({B, T}));
      ASSERT_EQ(t.dtype(), Dtype::i64);
    }
    const std::vector<int64_t> x = values(batch.x), y = values(batch.y);
    const std::vector<int64_t> mask = values(batch.predictable);
    const std::vector<int64_t> targets = values(targets_predictable_only(batch));
    ASSERT_EQ(targets.size(), static_cast<std::size_t>(B * T));
    std::map<int64_t, int> periods;
    std::set<int64_t> tokens;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int64_t> s(x.begin() + b * T, x.begin() + (b + 1) * T);
      s.push_back(y[b * T + T - 1]);
      const int64_t P = first_repeat(s);  // s[0:P] distinct by the definition of P
      ASSERT_GE(P, lo);
      ASSERT_LE(P, hi);
      ++periods[P];
      for (int64_t t = 0; t <= T; ++t) {
        ASSERT_GE(s[t], 0);
        ASSERT_LT(s[t], V);
        tokens.insert(s[t]);
        if (t >= P) {
          ASSERT_EQ(s[t], s[t - P]) << "row " << b << ", t " << t;
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = b * T + t;
        ASSERT_EQ(y[i], s[t + 1]);
        ASSERT_EQ(mask[i], t >= P ? 1 : 0) << "row " << b << ", t " << t << ", P " << P;
        ASSERT_EQ(targets[i], t >= P ? y[i] : -1);
        // Predictable means copyable: the token after x[t]'s earlier occurrence, if any.
        const auto earlier = std::find(s.begin(), s.begin() + t, s[t]);
        if (mask[i]) {
          ASSERT_EQ(*(earlier + 1), y[i]);
        } else {
          ASSERT_EQ(earlier, s.begin() + t);
        }
      }
    }
    // Every period of [lo, hi] occurs, about equally often, and every token is used.
    ASSERT_EQ(static_cast<int64_t>(periods.size()), hi - lo + 1);
    for (const auto& [P, count] : periods)
      EXPECT_NEAR(count, static_cast<double>(B) / (hi - lo + 1), 0.2 * B / (hi - lo + 1)) << P;
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), V);
  }
}

TEST(Induction, SameSeedSameBatchAndBadSizes) {
  Rng a(3), b(3), c(4);
  const InductionBatch ba = induction_batch(4, 12, 10, a);
  EXPECT_EQ(values(ba.x), values(induction_batch(4, 12, 10, b).x));
  EXPECT_NE(values(ba.x), values(induction_batch(4, 12, 10, c).x));
  Rng rng(0);
  const auto make = [&](int64_t B, int64_t T, int64_t V) {
    return throws<ValueError>([&, B, T, V] { induction_batch(B, T, V, rng); });
  };
  expect_rows({
      {"V too small", make(2, 15, 7),
       "induction_batch: vocabulary size 7 is too small for block size T = 15: a period of up to "
       "ceil((T + 1) / 2) = 8 distinct tokens needs V >= 8"},
      {"V too small, odd T + 1", make(2, 16, 8), "needs V >= 9"},
      {"zero batch", make(0, 8, 10), "batch size 0 and block size 8"},
      {"zero block", make(1, 0, 10), "must both be at least 1"},
  });
  EXPECT_NO_THROW(induction_batch(2, 15, 8, rng));
  EXPECT_NO_THROW(induction_batch(2, 16, 9, rng));
}

TEST(Induction, AccuracyCountsPredictableTargetsOnly) {
  Rng rng(9);
  constexpr int64_t B = 6, T = 12, V = 10;
  const InductionBatch batch = induction_batch(B, T, V, rng);
  const std::vector<int64_t> y = values(batch.y), mask = values(batch.predictable);
  // Logits voting for `pick(i)` at flat position i.
  const auto logits_for = [&](const std::function<int64_t(int64_t)>& pick, Dtype dtype) {
    std::vector<double> z(B * T * V, -1.0);
    for (int64_t i = 0; i < B * T; ++i) z[i * V + pick(i)] = 2.0;
    return from_vector(z, {B, T, V}, dtype);
  };
  const auto right = [&](int64_t i) { return y[i]; };
  const auto wrong_where_unpredictable = [&](int64_t i) { return mask[i] ? y[i] : (y[i] + 1) % V; };
  const auto all_wrong = [&](int64_t i) { return (y[i] + 1) % V; };
  int64_t first_half = 0, predictable = 0;  // right on predictable targets of rows 0..2 only
  for (int64_t i = 0; i < B * T; ++i) {
    predictable += mask[i];
    first_half += mask[i] && i < B * T / 2;
  }
  const auto half = [&](int64_t i) { return i < B * T / 2 ? y[i] : (y[i] + 1) % V; };
  for (Dtype dtype : {Dtype::f32, Dtype::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_EQ(induction_accuracy(logits_for(right, dtype), batch), 1.0);
    EXPECT_EQ(induction_accuracy(logits_for(wrong_where_unpredictable, dtype), batch), 1.0);
    EXPECT_EQ(induction_accuracy(logits_for(all_wrong, dtype), batch), 0.0);
    EXPECT_DOUBLE_EQ(induction_accuracy(logits_for(half, dtype), batch),
                     static_cast<double>(first_half) / static_cast<double>(predictable));
  }
  // Ties go to the first maximum, as torch.argmax: all-zero logits predict token 0.
  int64_t zeros_right = 0;
  for (int64_t i = 0; i < B * T; ++i) zeros_right += mask[i] && y[i] == 0;
  EXPECT_DOUBLE_EQ(induction_accuracy(zeros({B, T, V}), batch),
                   static_cast<double>(zeros_right) / static_cast<double>(predictable));
  // T = 1: the period is 1 and x[0] has no earlier occurrence, so nothing is predictable.
  EXPECT_TRUE(std::isnan(induction_accuracy(zeros({2, 1, 1}), induction_batch(2, 1, 1, rng))));

  expect_rows({
      {"rank 2", throws<ShapeError>([&] { induction_accuracy(zeros({B * T, V}), batch); }),
       "induction_accuracy: logits (72, 10) do not fit targets (6, 12): expected (6, 12, V)"},
      {"wrong T", throws<ShapeError>([&] { induction_accuracy(zeros({B, T + 1, V}), batch); }),
       "logits (6, 13, 10) do not fit targets (6, 12)"},
      {"int64 logits",
       throws<ValueError>([&] { induction_accuracy(Tensor({B, T, V}, Dtype::i64), batch); }),
       "int64"},
  });
}

}  // namespace
}  // namespace tg::data
