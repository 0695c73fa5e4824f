#pragma once
// The character-level tokenizer of nanoGPT's shakespeare_char: the vocabulary is the sorted set
// of the characters of the training text, and a character's id is its place in that order.
// Characters are Unicode code points of UTF-8 text (as Python's str has them), so a vocabulary
// is itself UTF-8 text, which a checkpoint stores as `tapegrad.vocab`; for ASCII text
// (Shakespeare) the ids are nanoGPT's.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tg::data {

class CharTokenizer {
 public:
  /// The vocabulary of `text`: its distinct characters in increasing code point order. Throws
  /// ValueError for an empty text or one that is not valid UTF-8 (naming the byte position).
  static CharTokenizer from_text(std::string_view text);
  /// Restores a saved vocabulary (vocab() of the tokenizer a checkpoint was trained with); ids
  /// are positions in it. Throws ValueError when it is empty, not UTF-8 or repeats a character.
  static CharTokenizer from_vocab(std::string_view vocab);

  /// The characters in id order, as UTF-8: what a checkpoint stores as `tapegrad.vocab`.
  const std::string& vocab() const { return vocab_; }
  /// The number of characters.
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }

  /// The ids of the characters of `text`; throws ValueError naming the first character outside
  /// the vocabulary and its byte position, or the first byte that is not UTF-8.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The text of `ids`; throws ValueError naming the first id outside [0, size()) and its index.
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  explicit CharTokenizer(std::string_view vocab);

  std::string vocab_;
  std::vector<std::string> chars_;         // each id's character, UTF-8
  std::array<int32_t, 128> id_of_ascii_;   // -1 for one outside the vocabulary
  std::map<char32_t, int64_t> id_of_other_;
};

/// A character as a message shows it: 'a', 'é', or escaped when unprintable: '\n', '\x01'.
std::string quote_char(char32_t c);

}  // namespace tg::data
