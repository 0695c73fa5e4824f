#pragma once
// The character-level tokenizer of nanoGPT's shakespeare_char: the vocabulary is the sorted set
// of the characters of the training text, and a character's id is its place in that order.
// Characters here are bytes, not Unicode code points: a UTF-8 text's multi-byte characters
// become one token per byte (sorted by byte value). Encoding and decoding still round-trip any
// text exactly, and for ASCII text (Shakespeare) the ids are nanoGPT's.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tg::data {

class CharTokenizer {
 public:
  /// The vocabulary of `text`: its distinct bytes in increasing order. Throws ValueError for an
  /// empty text.
  static CharTokenizer from_text(std::string_view text);
  /// Restores a saved vocabulary (vocab() of the tokenizer a checkpoint was trained with); ids
  /// are positions in it. Throws ValueError when it is empty or repeats a character.
  static CharTokenizer from_vocab(std::string_view vocab);

  /// The characters, id order: what a checkpoint stores as `tapegrad.vocab`.
  const std::string& vocab() const { return vocab_; }
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }

  /// The ids of the characters of `text`; throws ValueError naming the first character outside
  /// the vocabulary and its byte position.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The text of `ids`; throws ValueError naming the first id outside [0, size()) and its index.
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  explicit CharTokenizer(std::string vocab);

  std::string vocab_;
  std::array<int16_t, 256> id_of_byte_{};  // -1 for a byte outside the vocabulary
};

/// A byte as a message shows it: 'a', or escaped when unprintable: '\n', '\x01', '\xc3'.
std::string quote_char(char c);

}  // namespace tg::data
