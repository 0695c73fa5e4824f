#include "data/tokenizer.h"

#include <cstdio>
#include <utility>

#include "autograd/error.h"

namespace tg::data {

std::string quote_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  switch (c) {
    case '\n':
      return "'\\n'";
    case '\t':
      return "'\\t'";
    case '\r':
      return "'\\r'";
    case '\'':
      return "'\\''";
    case '\\':
      return "'\\\\'";
    default:
      break;
  }
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char hex[8];
  std::snprintf(hex, sizeof hex, "'\\x%02x'", u);
  return hex;
}

CharTokenizer::CharTokenizer(std::string vocab) : vocab_(std::move(vocab)) {
  if (vocab_.empty()) throw ValueError("CharTokenizer: the vocabulary is empty");
  id_of_byte_.fill(-1);
  for (std::size_t i = 0; i < vocab_.size(); ++i) {
    int16_t& id = id_of_byte_[static_cast<unsigned char>(vocab_[i])];
    if (id >= 0)
      throw ValueError("CharTokenizer: the vocabulary repeats the character " +
                       quote_char(vocab_[i]) + " (positions " + std::to_string(id) + " and " +
                       std::to_string(i) + ")");
    id = static_cast<int16_t>(i);
  }
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  if (text.empty()) throw ValueError("CharTokenizer::from_text: the text is empty");
  std::array<bool, 256> seen{};
  for (const char c : text) seen[static_cast<unsigned char>(c)] = true;
  std::string vocab;
  for (int b = 0; b < 256; ++b)
    if (seen[b]) vocab += static_cast<char>(b);
  return CharTokenizer(std::move(vocab));
}

CharTokenizer CharTokenizer::from_vocab(std::string_view vocab) {
  return CharTokenizer(std::string(vocab));
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const int16_t id = id_of_byte_[static_cast<unsigned char>(text[i])];
    if (id < 0)
      throw ValueError("CharTokenizer::encode: character " + quote_char(text[i]) + " at position " +
                       std::to_string(i) + " is not in the vocabulary (" + std::to_string(size()) +
                       " characters)");
    ids[i] = id;
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size())
      throw ValueError("CharTokenizer::decode: id " + std::to_string(ids[i]) + " at index " +
                       std::to_string(i) + " is outside the vocabulary [0, " +
                       std::to_string(size()) + ")");
    text[i] = vocab_[static_cast<std::size_t>(ids[i])];
  }
  return text;
}

}  // namespace tg::data
